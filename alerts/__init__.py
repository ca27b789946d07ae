"""Notifications: email and webhook subscriptions to materialized tables' and namespaces'
outcomes."""

"""The Django-free core of maintenance: the policy and which actions are due."""

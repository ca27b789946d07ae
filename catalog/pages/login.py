"""The login page, with failed sign-ins throttled (catalog/throttle.py)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse

from catalog import throttle


class ThrottledLoginView(LoginView):
    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        account = request.POST.get("username", "")[:255]
        wait = throttle.retry_after(request, scope="page", account=account)
        if wait:
            form = self.get_form()
            form.errors.clear()
            form.add_error(None, throttle.message(wait))
            response = self.render_to_response(self.get_context_data(form=form))
            response.status_code = 429
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: Any) -> HttpResponse:
        account = self.request.POST.get("username", "")[:255]
        throttle.record_failure(self.request, scope="page", account=account)
        return super().form_invalid(form)

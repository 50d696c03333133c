"""Errors in OpenAI's shape: {"error": {"message", "type", "code"}} with the HTTP status."""

from __future__ import annotations

from django.http import JsonResponse


class ApiError(Exception):
    """A request refused with a sentence: `status`, OpenAI's error `type` and a `code`."""

    def __init__(
        self, status: int, message: str, kind: str = "invalid_request_error", code: str = "", retry_after=None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.code = status, message, kind, code
        self.retry_after = retry_after

    def as_dict(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "code": self.code or None}}

    def response(self) -> JsonResponse:
        response = JsonResponse(self.as_dict(), status=self.status)
        if self.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="pplxweb"'
        if self.retry_after:
            response["Retry-After"] = str(int(self.retry_after))
        return response


def invalid(message: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, "invalid_request_error", code)


UNAUTHENTICATED = (
    "This needs an agent token: Authorization: Bearer TOKEN. Each person makes theirs in "
    "pplxweb's Settings → Agents."
)
WRONG_TOKEN = "That agent token is not valid (mistyped, or revoked). Make a new one in Settings → Agents."  # noqa: S105

"""ApiError and the `Status` bodies kube-apiserver returns for failures."""
from __future__ import annotations

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


_DETAIL_ORDER = ("name", "group", "kind", "uid", "causes", "retryAfterSeconds")


class ApiError(Exception):
    """A failure that becomes a `Status` body with `code` as the HTTP status."""

    def __init__(self, code: int, message: str, reason: str | None = None, *, name: str | None = None,
                 group: str | None = None, kind: str | None = None, causes: list[dict] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details: dict = {}
        self.always_details = False  # the real body carries "details": {} even when empty (see no_route)
        if name is not None:
            self.details["name"] = name
        if group:         # the real server omits the empty core group
            self.details["group"] = group
        if kind is not None:
            self.details["kind"] = kind
        if causes:
            self.details["causes"] = causes

    def status(self) -> dict:
        """The Status body, fields in metav1.Status's order (k8s.io/apimachinery/pkg/apis/meta/v1/types.go:
        TypeMeta, ListMeta, status, message, reason, details, code), details in StatusDetails' (name, group,
        kind, uid, causes, retryAfterSeconds), as Go's encoder writes a struct."""
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason}
        if self.details or self.always_details:
            body["details"] = {k: self.details[k] for k in _DETAIL_ORDER if k in self.details}
        body["code"] = self.code
        return body

    def __repr__(self) -> str:
        return f"ApiError({self.code}, {self.reason}, {self.message!r})"


def _qualified(rt) -> str:
    """`pods`, `deployments.apps`: how the real server names a resource in messages."""
    return rt.plural if not rt.group else f"{rt.plural}.{rt.group}"


def no_route() -> ApiError:
    """A path under a served group/version that names no resource there (a Secret under ``apps/v1``, a
    Deployment under ``/api/v1``, a subresource the kind lacks). kube-apiserver's director hands any path
    under a registered group/version to go-restful; no route matches, and its service error handler
    (k8s.io/apiserver/pkg/server/handler.go, ``serviceErrorHandler``) answers
    ``apierrors.NewGenericServerResponse(404, "", schema.GroupResource{}, "", ...)``: reason NotFound, this
    fixed message, and an empty but present ``details`` (k8s.io/apimachinery/pkg/api/errors/errors.go).
    Never the object of the right group that has the same name."""
    err = ApiError(404, "the server could not find the requested resource", "NotFound")
    err.always_details = True
    return err


def not_found(rt, name: str) -> ApiError:
    return ApiError(404, f'{_qualified(rt)} "{name}" not found', "NotFound", name=name, group=rt.group,
                    kind=rt.plural)


def namespace_not_found(name: str) -> ApiError:
    return ApiError(404, f'namespaces "{name}" not found', "NotFound", name=name, group="", kind="namespaces")


def already_exists(rt, name: str) -> ApiError:
    return ApiError(409, f'{_qualified(rt)} "{name}" already exists', "AlreadyExists", name=name,
                    group=rt.group, kind=rt.plural)


def conflict(rt, name: str, why: str = "the object has been modified; please apply your changes to the "
             "latest version and try again") -> ApiError:
    return ApiError(409, f'Operation cannot be fulfilled on {_qualified(rt)} "{name}": {why}', "Conflict",
                    name=name, group=rt.group, kind=rt.plural)


def invalid(rt, name: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """causes: (field, reason type e.g. 'FieldValueRequired', message e.g. 'Required value')."""
    parts = [f"{field}: {msg}" for field, _t, msg in causes]
    text = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    kind = rt.kind if not rt.group else f"{rt.kind}.{rt.group}"     # schema.GroupKind.String(): Job.batch
    return ApiError(422, f'{kind} "{name}" is invalid: {text}', "Invalid", name=name, group=rt.group,
                    kind=rt.kind,
                    causes=[{"reason": t, "message": m, "field": f} for f, t, m in causes])



def gone(message: str) -> ApiError:
    return ApiError(410, message, "Expired")

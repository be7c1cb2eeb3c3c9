"""The wasmop SDK's checks for a Python plugin, in plain Python (no bindings, no dependency).

The same semantics and messages as the Rust SDK (`wasmop-sdk`), checked against the same test
vectors (`guest-sdk/vectors/sdk.json` in the wasmop repository), so a plugin's unit tests
(`python3 -m unittest`) see what the host will see:

- `Quantity`: Kubernetes quantities (`1Gi`, `500m`, `1.5`, `2e3`), parsed exactly and compared
  by value; `QuantityError` names the text.
- `condition`, `true_`, `false_`, `unknown`: conditions as dicts; `set_condition` (by type, a
  later one wins); `merge_conditions` and `shown_conditions`: what the parent's
  `status.conditions` become, with `observedGeneration` and `lastTransitionTime`, as the host
  writes them.
- `Terminal`, `Retryable`: a failed reconcile, with the status and conditions the parent shows
  beside it (`with_status`, `with_condition`).
- `Request`: the parent, its observed children, the related objects and the configuration as
  dicts (`Request.from_contract(request)` in the component's entry), with `name`, `namespace`,
  `child(kind, name)` and `new_child(kind, name, body)`, which builds a child in the parent's
  namespace; `field(obj, "status", "readyReplicas", default=0)` reads a nested field.
- `Response`: children, deletions, status, conditions, events, requeue, built with chained calls
  that check the shapes the host needs; `validate()` raises the first mistake as `Terminal`.
  `to_contract()` (on a response, or on a failure, to raise) turns it into the contract's
  records inside the component.
- `LabelSelector`: kubectl selector syntax, as the host parses and matches it.
- `Fixture`: lookups answered from a list of objects, as the host answers from its cache,
  refusing kinds the manifest does not declare (`LookupRefused`).

Kinds are dicts `{"group": "apps", "version": "v1", "kind": "Deployment"}` (`kind(...)`).
"""

import json

__all__ = [
    "Failure",
    "Fixture",
    "LabelSelector",
    "LookupRefused",
    "Quantity",
    "QuantityError",
    "Request",
    "Response",
    "Retryable",
    "SelectorError",
    "Terminal",
    "api_version",
    "condition",
    "false_",
    "field",
    "kind",
    "kind_of",
    "kind_text",
    "matches_kind",
    "merge_conditions",
    "set_condition",
    "shown_conditions",
    "true_",
    "unknown",
]

I128_MAX = 2**127 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def _debug(text):
    """A text quoted as the Rust SDK's messages quote it."""
    return json.dumps(text, ensure_ascii=False)


def _json_type(value):
    """What a JSON value is, as the Rust SDK's messages name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "not JSON"


# Kinds


def kind(group, version, kind_name):
    """A kind: `kind("apps", "v1", "Deployment")`, `kind("", "v1", "Pod")` for the core group."""
    return {"group": group, "version": version, "kind": kind_name}


def api_version(k):
    """`group/version`, or `version` for the core group."""
    return f"{k['group']}/{k['version']}" if k["group"] else k["version"]


def kind_text(k):
    """`group/version/Kind` (`version/Kind` for the core group), as the host writes a kind."""
    return f"{api_version(k)}/{k['kind']}"


def kind_of(obj):
    """The kind of an object from its `apiVersion` and `kind`, or None when either is missing."""
    if not isinstance(obj, dict):
        return None
    version, name = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(version, str) or not isinstance(name, str):
        return None
    group, slash, rest = version.partition("/")
    return kind(group, rest, name) if slash else kind("", version, name)


def matches_kind(k, obj):
    """Whether an object is of kind `k` (its `apiVersion` and `kind` match)."""
    return kind_of(obj) == kind(k["group"], k["version"], k["kind"])


# Quantities


class QuantityError(ValueError):
    """Why a text is not a Kubernetes quantity: `kind` is `"malformed"` (not a number with an
    optional suffix) or `"out_of_range"` (too large to hold, more than about 10^29); `text` is
    the text."""

    def __init__(self, kind_, text):
        self.kind = kind_
        self.text = text
        if kind_ == "malformed":
            message = f"{_debug(text)} is not a quantity: write a number with an optional suffix, like 1Gi, 500m, 1.5 or 2e3"
        else:
            message = f"quantity {_debug(text)} is out of range"
        super().__init__(message)


_BINARY = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_DECIMAL = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def _suffix_scale(suffix):
    """The binary power of two and the decimal exponent of a suffix; None if it is not one."""
    if suffix in _BINARY:
        return 10 * (_BINARY.index(suffix) + 1), 0
    if suffix in _DECIMAL:
        return 0, _DECIMAL[suffix]
    if suffix[:1] not in ("e", "E"):
        return None
    exponent = suffix[1:]
    digits = exponent[1:] if exponent[:1] in ("+", "-") else exponent
    if not digits or not all("0" <= c <= "9" for c in digits) or len(digits) > 4:
        return None
    return 0, int(exponent)


def _ceil_div(n, d):
    """n / d rounded up, for d > 0 (Rust's integer division, plus one on a positive rest)."""
    q = abs(n) // d * (1 if n >= 0 else -1)
    return q + 1 if n - q * d > 0 else q


def _i64(n):
    return n if I64_MIN <= n <= I64_MAX else None


class Quantity:
    """A Kubernetes resource quantity (`resource.Quantity`): a storage size, a CPU amount, a
    count. Kept exactly, in billionths (`nanos`); finer fractions round up, as Kubernetes does.
    Quantities compare by value whatever their suffix, and `str()` is the text as written.

    >>> Quantity.parse("1Gi") > Quantity.parse("1G")
    True
    >>> Quantity.parse("500m") == Quantity.parse("0.5")
    True
    >>> Quantity.parse("1.5").to_units_ceil()
    2
    """

    __slots__ = ("text", "nanos")

    def __init__(self, text, nanos):
        self.text = text
        self.nanos = nanos

    @classmethod
    def parse(cls, text):
        """Parse a quantity in Kubernetes syntax. Raises `QuantityError`."""
        negative, unsigned = False, text
        if text[:1] in ("-", "+"):
            negative, unsigned = text[0] == "-", text[1:]
        number_len = 0
        while number_len < len(unsigned) and (unsigned[number_len].isdigit() and unsigned[number_len].isascii() or unsigned[number_len] == "."):
            number_len += 1
        number, suffix = unsigned[:number_len], unsigned[number_len:]
        whole, _, fraction = number.partition(".")
        if (not whole and not fraction) or "." in fraction:
            raise QuantityError("malformed", text)
        digits = (whole + fraction).lstrip("0")
        if len(digits) > 30:
            raise QuantityError("out_of_range", text)
        mantissa = int(digits) if digits else 0
        scale = _suffix_scale(suffix)
        if scale is None:
            raise QuantityError("malformed", text)
        binary_power, decimal_exponent = scale
        exponent = decimal_exponent + 9 - len(fraction)
        scaled = mantissa * 2**binary_power
        if scaled > I128_MAX:
            raise QuantityError("out_of_range", text)
        if exponent >= 0:
            factor = 10**exponent
            if factor > I128_MAX or scaled * factor > I128_MAX:
                raise QuantityError("out_of_range", text)
            nanos = scaled * factor
        else:
            divisor = 10 ** (-exponent)
            nanos = (scaled + divisor - 1) // divisor if divisor <= I128_MAX else int(scaled > 0)
        return cls(text, -nanos if negative else nanos)

    @classmethod
    def from_json(cls, value):
        """A quantity as a JSON field holds it: a string, or a number (as
        `x-kubernetes-int-or-string` allows). Raises `QuantityError`."""
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise QuantityError("malformed", json.dumps(value))
        return cls.parse(value if isinstance(value, str) else str(value))

    def to_units_ceil(self):
        """The value in whole units, rounded up (`1.5` is 2, `100m` is 1), like Kubernetes'
        `Quantity.Value()`; None beyond a 64-bit integer."""
        return _i64(_ceil_div(self.nanos, 1_000_000_000))

    def to_millis_ceil(self):
        """The value in thousandths, rounded up (`0.5` is 500), like `Quantity.MilliValue()`;
        None beyond a 64-bit integer."""
        return _i64(_ceil_div(self.nanos, 1_000_000))

    def as_float(self):
        """The value in units, approximate."""
        return self.nanos / 1e9

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"Quantity({self.text!r})"

    def __eq__(self, other):
        return isinstance(other, Quantity) and self.nanos == other.nanos

    def __lt__(self, other):
        return self.nanos < other.nanos

    def __le__(self, other):
        return self.nanos <= other.nanos

    def __gt__(self, other):
        return self.nanos > other.nanos

    def __ge__(self, other):
        return self.nanos >= other.nanos

    def __hash__(self):
        return hash(self.nanos)


# Conditions

_STATUS = {True: "True", False: "False", "True": "True", "False": "False", "Unknown": "Unknown"}


def condition(type_, status, reason, message=""):
    """A condition for the parent's `status.conditions`: `status` is True, False, "True",
    "False" or "Unknown". The host fills in `observedGeneration` and `lastTransitionTime`."""
    if status not in _STATUS:
        raise ValueError(f"condition {type_}: status must be True, False or Unknown, got {status!r}")
    return {"type": type_, "status": _STATUS[status], "reason": reason, "message": message}


def true_(type_, reason, message=""):
    """A condition that holds."""
    return condition(type_, "True", reason, message)


def false_(type_, reason, message=""):
    """A condition that does not hold."""
    return condition(type_, "False", reason, message)


def unknown(type_, reason, message=""):
    """A condition whose state the plugin cannot tell."""
    return condition(type_, "Unknown", reason, message)


def set_condition(conditions, new):
    """`conditions` with `new` set by type: one of the same type is removed, `new` goes last
    (a later condition of a type wins). Returns a new list."""
    return [c for c in conditions if c["type"] != new["type"]] + [new]


def merge_conditions(existing, updates, generation, now):
    """The parent's `status.conditions` after the host sets `updates` on `existing`, as it
    writes them: a condition whose status did not change keeps its `lastTransitionTime`, others
    get `now`; every updated condition gets `observedGeneration` (`generation`, the parent's
    `metadata.generation`, when not None); conditions not mentioned are kept as they are."""
    merged = [dict(c) for c in existing]
    for update in updates:
        position = next((i for i, c in enumerate(merged) if c.get("type") == update["type"]), None)
        transition = now
        if position is not None and merged[position].get("status") == update["status"]:
            kept = merged[position].get("lastTransitionTime")
            transition = kept if isinstance(kept, str) else now
        value = {
            "type": update["type"],
            "status": update["status"],
            "reason": update["reason"],
            "message": update["message"],
            "lastTransitionTime": transition,
        }
        if generation is not None:
            value["observedGeneration"] = generation
        if position is None:
            merged.append(value)
        else:
            merged[position] = value
    return merged


def shown_conditions(parent, updates, now="2024-01-01T00:00:00Z"):
    """`merge_conditions` on `parent`: its `status.conditions` and `metadata.generation`."""
    existing = ((parent.get("status") or {}).get("conditions")) or []
    generation = (parent.get("metadata") or {}).get("generation")
    known = isinstance(generation, int) and not isinstance(generation, bool)
    return merge_conditions(existing, updates, generation if known else None, now)


# Failures


class Failure(Exception):
    """A failed reconcile: its message, and what the parent shows beside it — `status` (fields
    of its status, a dict, or None) and `conditions` (at most one per type) — which the host
    applies before it records the failure (WIT 0.3.0). `retryable` says whether the host
    retries it."""

    retryable = False

    def __init__(self, message, status=None, conditions=()):
        super().__init__(message)
        self.message = message
        self.status = None
        self.conditions = []
        if status is not None:
            self.with_status(status)
        for c in conditions:
            self.with_condition(c)

    def __str__(self):
        return self.message

    def with_status(self, fields):
        """Status fields to show with the failure, merged into fields set before. A value that
        is not a JSON object is not shown: the message says so instead. Returns the failure."""
        if isinstance(fields, dict):
            self.status = {**(self.status or {}), **fields}
        else:
            got = "an array" if isinstance(fields, (list, tuple)) else "not an object"
            self.message = f"{self.message} (status not shown: it must be a JSON object, got {got})"
            self.args = (self.message,)
        return self

    def with_condition(self, c):
        """A condition to show with the failure (by type; a later one wins). Returns the
        failure."""
        self.conditions = set_condition(self.conditions, c)
        return self

    def shown(self):
        """The message, status and conditions, as the contract's failure carries them."""
        return {"message": self.message, "status": self.status, "conditions": list(self.conditions)}

    def to_contract(self):
        """The contract's error result, for the component's entry to raise (`raise
        error.to_contract()`). Only inside the component: it imports componentize-py's bindings."""
        from componentize_py_types import Err
        from wit_world.exports import reconciler as r

        status = None if self.status is None else json.dumps(self.status)
        failure = r.Failure(message=self.message, status=status, conditions=[_contract_condition(c) for c in self.conditions])
        return Err(r.ReconcileError_Retryable(failure) if self.retryable else r.ReconcileError_Terminal(failure))


def _contract_condition(c):
    """A condition dict as the contract's record (inside the component only)."""
    from wit_world.exports import reconciler as r

    status = {"True": r.ConditionStatus.TRUE, "False": r.ConditionStatus.FALSE, "Unknown": r.ConditionStatus.UNKNOWN}
    return r.Condition(c["type"], status[c["status"]], c["reason"], c["message"])


class Terminal(Failure):
    """A permanent failure for this version of the parent (an invalid spec): the host records
    it and waits for the object to change."""


class Retryable(Failure):
    """A transient failure (something not ready yet): the host retries with backoff."""

    retryable = True


# Requests

_MISSING = object()


def field(obj, *path, default=None):
    """The value at `path` (keys of nested dicts) in `obj`, or `default` when `obj` is None or a
    step is missing or not a dict: `field(observed, "status", "readyReplicas", default=0)`."""
    value = obj
    for key in path:
        value = value.get(key, _MISSING) if isinstance(value, dict) else _MISSING
        if value is _MISSING:
            return default
    return default if value is None else value


class Request:
    """One reconcile's input as plain values: the `parent` (a dict, as `kubectl get -o json`
    prints it), the observed `children` it controls and the `related` objects its selectors
    picked (lists of dicts), the operator's `config` (a dict, `{}` when none) and `finalizing`.
    In a unit test build it directly: `Request(parent, children=[deployment])`."""

    def __init__(self, parent, children=(), related=(), config=None, finalizing=False):
        self.parent = parent
        self.children = list(children)
        self.related = list(related)
        self.config = {} if config is None else config
        self.finalizing = finalizing

    @classmethod
    def from_contract(cls, request):
        """The contract's request record (JSON text fields), in the component's entry."""
        return cls(
            json.loads(request.parent),
            [json.loads(c) for c in request.children],
            [json.loads(o) for o in request.related],
            json.loads(request.config) if request.config else {},
            request.finalizing,
        )

    @property
    def name(self):
        """The parent's name."""
        return _name_of(self.parent)

    @property
    def namespace(self):
        """The parent's namespace, or None for a cluster-scoped parent."""
        return _namespace_of(self.parent)

    @property
    def generation(self):
        """The parent's `metadata.generation`, or None."""
        generation = field(self.parent, "metadata", "generation")
        return generation if isinstance(generation, int) and not isinstance(generation, bool) else None

    def children_of(self, k):
        """The observed children of kind `k`."""
        return [c for c in self.children if matches_kind(k, c)]

    def child(self, k, name):
        """The observed child of kind `k` named `name`, or None."""
        return next((c for c in self.children if matches_kind(k, c) and _name_of(c) == name), None)

    def related_of(self, k):
        """The related objects of kind `k`."""
        return [o for o in self.related if matches_kind(k, o)]

    def new_child(self, k, name, body=None):
        """A child for the response: an object of kind `k` named `name` in the parent's
        namespace (none for a cluster-scoped parent), with the fields of `body` beside its
        `apiVersion`, `kind` and `metadata`; `body["metadata"]` (labels, annotations) is merged
        into the metadata, whose name and namespace stay these. `body` is not changed.
        Raises `TypeError` when `body` or its metadata is not a dict (a bug in the plugin)."""
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise TypeError(f"the body of a new child must be a JSON object, got {_json_type(body)}")
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise TypeError(f"the metadata of a new child must be a JSON object, got {_json_type(metadata)}")
        metadata = dict(metadata or {})
        metadata["name"] = name
        metadata.pop("namespace", None)
        if self.namespace is not None:
            metadata["namespace"] = self.namespace
        rest = {key: value for key, value in body.items() if key not in ("apiVersion", "kind", "metadata")}
        return {"apiVersion": api_version(k), "kind": k["kind"], "metadata": metadata, **rest}


# Responses


def _check_child(child):
    """None when a child has what the host needs, else the mistake."""
    if not isinstance(child, dict):
        return f"must be a JSON object, got {_json_type(child)}"
    for field in ("apiVersion", "kind"):
        value = child.get(field)
        if not isinstance(value, str) or not value:
            return f"has no {field}"
    name = (child.get("metadata") or {}).get("name") if isinstance(child.get("metadata"), dict) else None
    if not isinstance(name, str) or not name:
        return f"{child['kind']} has no metadata.name"
    return None


class Response:
    """What the host should do for one parent, built with chained calls.

    `apply` and `status` check cheaply that a child is an object with `apiVersion`, `kind` and
    `metadata.name`, and that a status is an object. A mistake is a bug in the plugin: the
    response remembers the first one (`error`) and drops the bad value, and `validate()` raises
    it as `Terminal`, with the Rust SDK's message (`child #1: has no kind`).
    """

    def __init__(self):
        self.children = []
        self.deletions = []
        self.status_patch = None
        self.conditions = []
        self.events = []
        self.requeue_after_ms = None
        self.finalized = False
        self.error = None

    def apply(self, child):
        """Desire a child; the host applies it with a controller ownerReference to the parent."""
        index = len(self.children)
        mistake = _check_child(child)
        if mistake is None:
            self.children.append(child)
        else:
            self._fail(f"child #{index}: {mistake}")
        return self

    def delete(self, object_ref):
        """Delete a child explicitly: `{"kind": kind, "namespace": ..., "name": ...}`."""
        self.deletions.append(object_ref)
        return self

    def status(self, fields):
        """Fields of the parent's status (a dict); calling it again merges top-level fields."""
        if isinstance(fields, dict):
            self.status_patch = {**(self.status_patch or {}), **fields}
        else:
            self._fail(f"status must be a JSON object, got {_json_type(fields)}")
        return self

    def condition(self, c):
        """Set a condition on the parent (by type; a later one wins)."""
        self.conditions = set_condition(self.conditions, c)
        return self

    def event(self, type_, reason, action, note):
        """Record an event about the parent: `type_` is "Normal" or "Warning"."""
        self.events.append({"type": type_, "reason": reason, "action": action, "note": note})
        return self

    def requeue_after(self, ms):
        """Reconcile again after `ms` milliseconds even if nothing changes."""
        self.requeue_after_ms = ms
        return self

    def finalize(self):
        """When finalizing: cleanup is complete and the host may remove its finalizer."""
        self.finalized = True
        return self

    def child(self, k, name):
        """The desired child of kind `k` named `name`, or None."""
        return next((c for c in self.children if matches_kind(k, c) and c["metadata"]["name"] == name), None)

    def condition_of(self, type_):
        """The condition of this type, or None."""
        return next((c for c in self.conditions if c["type"] == type_), None)

    def validate(self):
        """The response, or raise the first mistake recorded while building it (`Terminal`)."""
        if self.error is not None:
            raise Terminal(self.error)
        return self

    def to_contract(self):
        """The contract's response record, after `validate()` (so a mistake raises `Terminal`).
        Only inside the component: it imports componentize-py's bindings."""
        from wit_world.exports import reconciler as r
        from wit_world.imports import types

        self.validate()
        event_type = {"Normal": r.EventType.NORMAL, "Warning": r.EventType.WARNING}
        deletions = [
            types.ObjectRef(api_version=api_version(d["kind"]), kind=d["kind"]["kind"], namespace=d.get("namespace"), name=d["name"])
            for d in self.deletions
        ]
        return r.Response(
            children=[json.dumps(c) for c in self.children],
            delete=deletions,
            status=None if self.status_patch is None else json.dumps(self.status_patch),
            conditions=[_contract_condition(c) for c in self.conditions],
            events=[r.Event(type=event_type[e["type"]], reason=e["reason"], action=e["action"], note=e["note"]) for e in self.events],
            requeue_after_ms=self.requeue_after_ms,
            finalized=self.finalized,
        )

    def _fail(self, message):
        if self.error is None:
            self.error = message


# Label selectors


class SelectorError(ValueError):
    """Why a label selector did not parse, naming the selector and the requirement."""


def _is_label_value(v):
    ok = all(c.isascii() and (c.isalnum() or c in "-_.") for c in v)
    return len(v) <= 63 and ok and (not v or (v[0].isascii() and v[0].isalnum() and v[-1].isascii() and v[-1].isalnum()))


def _is_label_key(k):
    prefix, slash, name = k.partition("/")
    if not slash:
        name = k
    else:
        dns = (
            0 < len(prefix) <= 253
            and all(c in "abcdefghijklmnopqrstuvwxyz0123456789-." for c in prefix)
            and prefix[0].isalnum()
            and prefix[-1].isalnum()
        )
        if not dns:
            name = ""
    return bool(name) and len(name) <= 63 and _is_label_value(name)


def _split_top_level(s):
    parts, depth, start = [], 0, 0
    for i, c in enumerate(s):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return parts


class LabelSelector:
    """A label selector in kubectl syntax: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`,
    `k`, `!k`, separated by commas; all must hold, and the empty selector matches everything."""

    def __init__(self, requirements):
        self.requirements = requirements

    @classmethod
    def parse(cls, selector):
        """Parse a selector. Raises `SelectorError` naming the requirement that does not parse."""
        requirements = []
        for raw in _split_top_level(selector):
            req = raw.strip()
            if not req:
                if not selector.strip():
                    continue
                raise SelectorError(f"label selector {_debug(selector)}: empty key in requirement {_debug(raw)}")
            requirements.append(cls._requirement(selector, req))
        return cls(requirements)

    @staticmethod
    def _requirement(selector, req):
        def invalid():
            return SelectorError(f"label selector {_debug(selector)}: invalid label key or value in {_debug(req)}")

        def key(k):
            k = k.strip()
            if not k:
                raise SelectorError(f"label selector {_debug(selector)}: empty key in requirement {_debug(req)}")
            if not _is_label_key(k):
                raise invalid()
            return k

        def value(v):
            v = v.strip()
            if not _is_label_value(v):
                raise invalid()
            return v

        if "!=" in req:
            k, _, v = req.partition("!=")
            return ("!=", key(k), value(v))
        if "=" in req:
            k, _, v = req.partition("==") if "==" in req else req.partition("=")
            return ("=", key(k), value(v))
        first_space = next((i for i, c in enumerate(req) if c.isspace()), None)
        if first_space is not None:
            rest = req[first_space + 1 :].lstrip()
            if rest.startswith("notin"):
                op, set_text = "notin", rest[len("notin") :]
            elif rest.startswith("in"):
                op, set_text = "in", rest[len("in") :]
            else:
                raise invalid()
            inner = set_text.strip()
            if not (inner.startswith("(") and inner.endswith(")") and len(inner) >= 2):
                raise SelectorError(f"label selector {_debug(selector)}: malformed set requirement {_debug(req)}")
            inner = inner[1:-1]
            values = {value(v) for v in inner.split(",")}
            if not values or not inner.strip():
                raise SelectorError(f"label selector {_debug(selector)}: malformed set requirement {_debug(req)}")
            return (op, key(req[:first_space]), values)
        if req.startswith("!"):
            return ("!", key(req[1:]), None)
        return ("exists", key(req), None)

    def matches(self, labels):
        """Whether labels (a dict, or None) satisfy every requirement."""

        def get(k):
            v = (labels or {}).get(k)
            return v if isinstance(v, str) else None

        for op, k, v in self.requirements:
            found = get(k)
            if op == "=" and found != v:
                return False
            if op == "!=" and found == v:
                return False
            if op == "in" and (found is None or found not in v):
                return False
            if op == "notin" and found is not None and found in v:
                return False
            if op == "exists" and found is None:
                return False
            if op == "!" and found is not None:
                return False
        return True

    def matches_object(self, obj):
        """Whether an object's `metadata.labels` satisfy the selector."""
        metadata = obj.get("metadata") if isinstance(obj, dict) else None
        labels = metadata.get("labels") if isinstance(metadata, dict) else None
        return self.matches(labels if isinstance(labels, dict) else None)


# Fixtures


class LookupRefused(Exception):
    """A lookup the host refuses: a kind the manifest does not declare (`kind not declared in
    the manifest: v1/Secret`) or a selector that does not parse (`invalid label selector:
    ...`). A bug in the plugin or its manifest, never transient."""


def _declared(manifest):
    kinds = []
    parent = manifest.get("parent")
    if parent is not None:
        kinds.append(parent["kind"] if isinstance(parent.get("kind"), dict) else parent)
    kinds.extend(manifest.get("children") or [])
    kinds.extend(r["kind"] if "kind" in r and isinstance(r["kind"], dict) else r for r in manifest.get("related") or [])
    return [kind(k["group"], k["version"], k["kind"]) for k in kinds]


def _namespace_of(obj):
    ns = (obj.get("metadata") or {}).get("namespace")
    return ns if isinstance(ns, str) else None


def _name_of(obj):
    name = (obj.get("metadata") or {}).get("name")
    return name if isinstance(name, str) else None


class Fixture:
    """Lookups answered from a list of objects, for unit tests, the way the host answers from
    its cache: `namespace=None` reads the parent's namespace (`parent_namespace`, `default`
    unless given; every namespace for a cluster-scoped parent), selectors are parsed and
    matched as the host does, lists are ordered by namespace and name, and with a `manifest`
    (`{"parent": kind, "scope": "namespaced" | "cluster", "children": [kind], "related":
    [{"kind": kind, "labelSelector": "..."}]}`) kinds it does not declare are refused with
    `LookupRefused`, as the host refuses them. It does not model the host policy's grants."""

    def __init__(self, objects, manifest=None, parent_namespace="default"):
        self.objects = list(objects)
        self.manifest = manifest
        self.parent_namespace = parent_namespace

    @classmethod
    def for_parent(cls, parent, objects, manifest=None):
        """A fixture for this parent object: `namespace=None` reads its namespace."""
        return cls(objects, manifest, _namespace_of(parent))

    def _check(self, k):
        if self.manifest is not None and kind(k["group"], k["version"], k["kind"]) not in _declared(self.manifest):
            raise LookupRefused(f"kind not declared in the manifest: {kind_text(k)}")

    def _namespace(self, namespace):
        if namespace is not None:
            return namespace
        if self.manifest is not None and self.manifest.get("scope") == "cluster":
            return None
        return self.parent_namespace

    def get(self, k, namespace, name):
        """The object of kind `k` named `name` (in `namespace`), or None."""
        self._check(k)
        ns = self._namespace(namespace)
        for obj in self.objects:
            if matches_kind(k, obj) and (ns is None or _namespace_of(obj) == ns) and _name_of(obj) == name:
                return obj
        return None

    def list(self, k, namespace=None, label_selector=""):
        """The objects of kind `k` (in `namespace`) whose labels match the selector, ordered by
        namespace and name."""
        self._check(k)
        try:
            selector = LabelSelector.parse(label_selector)
        except SelectorError as error:
            raise LookupRefused(f"invalid label selector: {error}") from None
        ns = self._namespace(namespace)
        found = [
            obj
            for obj in self.objects
            if matches_kind(k, obj) and (ns is None or _namespace_of(obj) == ns) and selector.matches_object(obj)
        ]
        return sorted(found, key=lambda o: (_namespace_of(o) or "", _name_of(o) or ""))

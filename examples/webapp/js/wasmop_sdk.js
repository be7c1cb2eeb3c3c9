// The wasmop SDK's checks for a JavaScript plugin, in plain JavaScript (an ES module with no
// bindings and no dependency: Node runs it as it is, and componentize-js builds it into the
// component with the plugin that imports it).
//
// The same semantics and messages as the Rust SDK (`wasmop-sdk`), checked against the same test
// vectors (`guest-sdk/vectors/sdk.json` in the wasmop repository), so a plugin's unit tests
// (`node --test`) see what the host will see:
//
// - `Quantity`: Kubernetes quantities (`1Gi`, `500m`, `1.5`, `2e3`), parsed exactly (BigInt
//   nanos) and compared by value; `QuantityError` names the text.
// - `condition`, `trueCondition`, `falseCondition`, `unknownCondition`: conditions as the
//   contract's records (`status` is `'true'`, `'false'` or `'unknown'`); `setCondition` (by type,
//   a later one wins); `mergeConditions` and `shownConditions`: what the parent's
//   `status.conditions` become, with `observedGeneration` and `lastTransitionTime`, as the host
//   writes them.
// - `Terminal`, `Retryable`: a failed reconcile, with the status and conditions the parent shows
//   beside it (`withStatus`, `withCondition`); `payload` is the contract's error result.
// - `Request`: the parent, its observed children, the related objects and the configuration as
//   plain objects (`Request.fromContract(request)` from the contract's record), with `name`,
//   `namespace`, `child(kind, name)` and `newChild(kind, name, body)`, which builds a child in
//   the parent's namespace.
// - `Response`: children, deletions, status, conditions, events, requeue, built with chained
//   calls that check the shapes the host needs; `validate()` throws the first mistake as
//   `Terminal`; `toContract()` is the contract's response record.
// - `LabelSelector`: kubectl selector syntax, as the host parses and matches it.
// - `Fixture`: lookups answered from a list of objects, as the host answers from its cache,
//   refusing kinds the manifest does not declare (`LookupRefused`).
//
// Kinds are objects `{ group: 'apps', version: 'v1', kind: 'Deployment' }` (`kind(...)`).

const I128_MAX = (1n << 127n) - 1n;
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;

/** A text quoted as the Rust SDK's messages quote it. */
const debug = (text) => JSON.stringify(text);

/** What a JSON value is, as the Rust SDK's messages name it. */
function jsonType(value) {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'boolean') return 'a boolean';
  if (typeof value === 'number' || typeof value === 'bigint') return 'a number';
  if (typeof value === 'string') return 'a string';
  if (Array.isArray(value)) return 'an array';
  return 'an object';
}

const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);

// Kinds

/** A kind: `kind('apps', 'v1', 'Deployment')`, `kind('', 'v1', 'Pod')` for the core group. */
export const kind = (group, version, kindName) => ({ group, version, kind: kindName });

/** `group/version`, or `version` for the core group. */
export const apiVersion = (k) => (k.group ? `${k.group}/${k.version}` : k.version);

/** `group/version/Kind` (`version/Kind` for the core group), as the host writes a kind. */
export const kindText = (k) => `${apiVersion(k)}/${k.kind}`;

/** The kind of an object from its `apiVersion` and `kind`, or `undefined` when either is missing. */
export function kindOf(object) {
  if (!isObject(object) || typeof object.apiVersion !== 'string' || typeof object.kind !== 'string') return undefined;
  const slash = object.apiVersion.indexOf('/');
  return slash < 0
    ? kind('', object.apiVersion, object.kind)
    : kind(object.apiVersion.slice(0, slash), object.apiVersion.slice(slash + 1), object.kind);
}

const sameKind = (a, b) => a.group === b.group && a.version === b.version && a.kind === b.kind;

/** Whether an object is of kind `k` (its `apiVersion` and `kind` match). */
export function matchesKind(k, object) {
  const of = kindOf(object);
  return of !== undefined && sameKind(of, k);
}

// Quantities

/** Why a text is not a Kubernetes quantity: `reason` is `'malformed'` (not a number with an
 * optional suffix) or `'out-of-range'` (too large to hold, more than about 10^29); `text` is
 * the text. */
export class QuantityError extends Error {
  constructor(reason, text) {
    super(
      reason === 'malformed'
        ? `${debug(text)} is not a quantity: write a number with an optional suffix, like 1Gi, 500m, 1.5 or 2e3`
        : `quantity ${debug(text)} is out of range`,
    );
    this.name = 'QuantityError';
    this.reason = reason;
    this.text = text;
  }
}

const BINARY = ['Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'];
const DECIMAL = { '': 0, n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const isDigit = (c) => c >= '0' && c <= '9';

/** The binary power of two and the decimal exponent of a suffix; `undefined` if it is not one. */
function suffixScale(suffix) {
  const binary = BINARY.indexOf(suffix);
  if (binary >= 0) return [10 * (binary + 1), 0];
  if (Object.hasOwn(DECIMAL, suffix)) return [0, DECIMAL[suffix]];
  if (suffix[0] !== 'e' && suffix[0] !== 'E') return undefined;
  const exponent = suffix.slice(1);
  const digits = exponent[0] === '+' || exponent[0] === '-' ? exponent.slice(1) : exponent;
  if (digits === '' || ![...digits].every(isDigit) || digits.length > 4) return undefined;
  return [0, Number.parseInt(exponent, 10)];
}

/** n / d rounded up, for d > 0 (Rust's integer division, plus one on a positive rest). */
function ceilDiv(n, d) {
  const q = n / d;
  return n % d > 0n ? q + 1n : q;
}

/** A 64-bit value as a Number (exact up to 2^53), or `null` beyond 64 bits. */
const i64 = (n) => (n < I64_MIN || n > I64_MAX ? null : Number(n));

/** A Kubernetes resource quantity (`resource.Quantity`): a storage size, a CPU amount, a count.
 * Kept exactly, in billionths (`nanos`, a BigInt); finer fractions round up, as Kubernetes does.
 * Quantities compare by value whatever their suffix (`compare`, `equals`), and `toString()` is
 * the text as written. */
export class Quantity {
  constructor(text, nanos) {
    this.text = text;
    this.nanos = nanos;
  }

  /** Parse a quantity in Kubernetes syntax. Throws `QuantityError`. */
  static parse(text) {
    let negative = false;
    let unsigned = text;
    if (text[0] === '-' || text[0] === '+') {
      negative = text[0] === '-';
      unsigned = text.slice(1);
    }
    let numberLen = 0;
    while (numberLen < unsigned.length && (isDigit(unsigned[numberLen]) || unsigned[numberLen] === '.')) numberLen += 1;
    const number = unsigned.slice(0, numberLen);
    const suffix = unsigned.slice(numberLen);
    const dot = number.indexOf('.');
    const whole = dot < 0 ? number : number.slice(0, dot);
    const fraction = dot < 0 ? '' : number.slice(dot + 1);
    if ((whole === '' && fraction === '') || fraction.includes('.')) throw new QuantityError('malformed', text);
    const digits = (whole + fraction).replace(/^0+/, '');
    if (digits.length > 30) throw new QuantityError('out-of-range', text);
    const mantissa = digits === '' ? 0n : BigInt(digits);
    const scale = suffixScale(suffix);
    if (scale === undefined) throw new QuantityError('malformed', text);
    const [binaryPower, decimalExponent] = scale;
    const exponent = decimalExponent + 9 - fraction.length;
    const scaled = mantissa * (1n << BigInt(binaryPower));
    if (scaled > I128_MAX) throw new QuantityError('out-of-range', text);
    let nanos;
    if (exponent >= 0) {
      if (exponent > 38) throw new QuantityError('out-of-range', text);
      nanos = scaled * 10n ** BigInt(exponent);
      if (nanos > I128_MAX) throw new QuantityError('out-of-range', text);
    } else if (-exponent > 38) {
      nanos = scaled > 0n ? 1n : 0n;
    } else {
      const divisor = 10n ** BigInt(-exponent);
      nanos = (scaled + divisor - 1n) / divisor;
    }
    return new Quantity(text, negative ? -nanos : nanos);
  }

  /** A quantity as a JSON field holds it: a string, or a number (as `x-kubernetes-int-or-string`
   * allows). Throws `QuantityError`. */
  static fromJson(value) {
    if (typeof value === 'string') return Quantity.parse(value);
    if (typeof value === 'number' && Number.isInteger(value)) return Quantity.parse(String(value));
    throw new QuantityError('malformed', JSON.stringify(value) ?? String(value));
  }

  /** The value in whole units, rounded up (`1.5` is 2, `100m` is 1), like Kubernetes'
   * `Quantity.Value()`; `null` beyond a 64-bit integer. */
  toUnitsCeil() {
    return i64(ceilDiv(this.nanos, 1000000000n));
  }

  /** The value in thousandths, rounded up (`0.5` is 500), like `Quantity.MilliValue()`; `null`
   * beyond a 64-bit integer. */
  toMillisCeil() {
    return i64(ceilDiv(this.nanos, 1000000n));
  }

  /** The value in units, approximate. */
  toNumber() {
    return Number(this.nanos) / 1e9;
  }

  /** -1, 0 or 1: this quantity's value against `other`'s. */
  compare(other) {
    return this.nanos < other.nanos ? -1 : this.nanos > other.nanos ? 1 : 0;
  }

  /** Whether both hold the same value (`1Ki` equals `1024`). */
  equals(other) {
    return this.nanos === other.nanos;
  }

  toString() {
    return this.text;
  }

  toJSON() {
    return this.text;
  }
}

// Conditions

const STATUS = new Map([
  [true, 'true'],
  [false, 'false'],
  ['true', 'true'],
  ['false', 'false'],
  ['unknown', 'unknown'],
  ['True', 'true'],
  ['False', 'false'],
  ['Unknown', 'unknown'],
]);
const KUBERNETES_STATUS = { true: 'True', false: 'False', unknown: 'Unknown' };

/** A condition for the parent's `status.conditions`, as the contract's record: `status` is
 * `true`, `false`, or `'true'`, `'false'`, `'unknown'` (`'True'`... too). The host fills in
 * `observedGeneration` and `lastTransitionTime`. */
export function condition(type, status, reason, message = '') {
  if (!STATUS.has(status)) throw new TypeError(`condition ${type}: status must be true, false or unknown, got ${debug(status)}`);
  return { type, status: STATUS.get(status), reason, message };
}

/** A condition that holds. */
export const trueCondition = (type, reason, message = '') => condition(type, 'true', reason, message);

/** A condition that does not hold. */
export const falseCondition = (type, reason, message = '') => condition(type, 'false', reason, message);

/** A condition whose state the plugin cannot tell. */
export const unknownCondition = (type, reason, message = '') => condition(type, 'unknown', reason, message);

/** `conditions` with `next` set by type: one of the same type is removed, `next` goes last (a
 * later condition of a type wins). Returns a new array. */
export const setCondition = (conditions, next) => [...conditions.filter((c) => c.type !== next.type), next];

/** The parent's `status.conditions` after the host sets `updates` (contract conditions, or
 * conditions with Kubernetes' `'True'`...) on `existing` (as in the parent), as it writes them:
 * a condition whose status did not change keeps its `lastTransitionTime`, others get `now`;
 * every updated condition gets `observedGeneration` (`generation`, the parent's
 * `metadata.generation`, unless `null`); conditions not mentioned are kept as they are. */
export function mergeConditions(existing, updates, generation, now) {
  const merged = existing.map((c) => ({ ...c }));
  for (const update of updates) {
    const status = KUBERNETES_STATUS[STATUS.get(update.status)];
    const position = merged.findIndex((c) => c.type === update.type);
    let transition = now;
    if (position >= 0 && merged[position].status === status && typeof merged[position].lastTransitionTime === 'string') {
      transition = merged[position].lastTransitionTime;
    }
    const value = { type: update.type, status, reason: update.reason, message: update.message, lastTransitionTime: transition };
    if (generation !== null && generation !== undefined) value.observedGeneration = generation;
    if (position < 0) merged.push(value);
    else merged[position] = value;
  }
  return merged;
}

/** `mergeConditions` on `parent`: its `status.conditions` and `metadata.generation`. */
export function shownConditions(parent, updates, now = '2024-01-01T00:00:00Z') {
  const existing = parent.status?.conditions ?? [];
  const generation = Number.isInteger(parent.metadata?.generation) ? parent.metadata.generation : null;
  return mergeConditions(existing, updates, generation, now);
}

// Failures

/** A failed reconcile: its message, and what the parent shows beside it — `status` (fields of
 * its status, an object, or `undefined`) and `conditions` (at most one per type) — which the host
 * applies before it records the failure (WIT 0.3.0). `payload` is the contract's error result,
 * `{ tag, val: { message, status, conditions } }`, which componentize-js hands the host when the
 * error is thrown out of `reconcile`: it reads only an own property named `payload`, so every
 * change here rewrites it. */
export class Failure extends Error {
  constructor(tag, message, { status, conditions = [] } = {}) {
    super(message);
    this.name = tag === 'retryable' ? 'Retryable' : 'Terminal';
    this.tag = tag;
    this.status = undefined;
    this.conditions = [];
    this.#refresh();
    if (status !== undefined) this.withStatus(status);
    for (const c of conditions) this.withCondition(c);
  }

  #refresh() {
    const status = this.status === undefined ? undefined : JSON.stringify(this.status);
    this.payload = { tag: this.tag, val: { message: this.message, status, conditions: this.conditions } };
  }

  /** Whether the host retries it. */
  get retryable() {
    return this.tag === 'retryable';
  }

  /** Status fields to show with the failure, merged into fields set before. A value that is not
   * a JSON object is not shown: the message says so instead. Returns the failure. */
  withStatus(fields) {
    if (isObject(fields)) {
      this.status = { ...this.status, ...fields };
    } else {
      const got = Array.isArray(fields) ? 'an array' : 'not an object';
      this.message = `${this.message} (status not shown: it must be a JSON object, got ${got})`;
    }
    this.#refresh();
    return this;
  }

  /** A condition to show with the failure (by type; a later one wins). Returns the failure. */
  withCondition(c) {
    this.conditions = setCondition(this.conditions, c);
    this.#refresh();
    return this;
  }

  /** The message, status and conditions. */
  shown() {
    return { message: this.message, status: this.status ?? null, conditions: [...this.conditions] };
  }
}

/** A permanent failure for this version of the parent (an invalid spec): the host records it
 * and waits for the object to change. `new Terminal(message, { status, conditions })`. */
export class Terminal extends Failure {
  constructor(message, shown) {
    super('terminal', message, shown);
  }
}

/** A transient failure (something not ready yet): the host retries with backoff. */
export class Retryable extends Failure {
  constructor(message, shown) {
    super('retryable', message, shown);
  }
}

// Requests

const nameOfObject = (object) => (typeof object?.metadata?.name === 'string' ? object.metadata.name : undefined);
const namespaceOfObject = (object) =>
  typeof object?.metadata?.namespace === 'string' ? object.metadata.namespace : undefined;

/** One reconcile's input as plain values: the `parent` (as `kubectl get -o json` prints it), the
 * observed `children` it controls and the `related` objects its selectors picked, the operator's
 * `config` (`{}` when none) and `finalizing`. In a unit test build it directly:
 * `new Request(parent, { children: [deployment] })`. */
export class Request {
  constructor(parent, { children = [], related = [], config = {}, finalizing = false } = {}) {
    this.parent = parent;
    this.children = [...children];
    this.related = [...related];
    this.config = config;
    this.finalizing = finalizing;
  }

  /** The contract's request record (JSON text fields), as the component is called with it. */
  static fromContract(request) {
    return new Request(JSON.parse(request.parent), {
      children: request.children.map((c) => JSON.parse(c)),
      related: request.related.map((o) => JSON.parse(o)),
      config: request.config ? JSON.parse(request.config) : {},
      finalizing: request.finalizing,
    });
  }

  /** The parent's name. */
  get name() {
    return nameOfObject(this.parent);
  }

  /** The parent's namespace, or `undefined` for a cluster-scoped parent. */
  get namespace() {
    return namespaceOfObject(this.parent);
  }

  /** The parent's `metadata.generation`, or `undefined`. */
  get generation() {
    const generation = this.parent?.metadata?.generation;
    return Number.isInteger(generation) ? generation : undefined;
  }

  /** The observed children of kind `k`. */
  childrenOf(k) {
    return this.children.filter((c) => matchesKind(k, c));
  }

  /** The observed child of kind `k` named `name`, or `undefined`. */
  child(k, name) {
    return this.children.find((c) => matchesKind(k, c) && nameOfObject(c) === name);
  }

  /** The related objects of kind `k`. */
  relatedOf(k) {
    return this.related.filter((o) => matchesKind(k, o));
  }

  /** A child for the response: an object of kind `k` named `name` in the parent's namespace
   * (none for a cluster-scoped parent), with the fields of `body` beside its `apiVersion`,
   * `kind` and `metadata`; `body.metadata` (labels, annotations) is merged into the metadata,
   * whose name and namespace stay these. `body` is not changed. Throws a `TypeError` when `body`
   * or its metadata is not an object (a bug in the plugin). */
  newChild(k, name, body = {}) {
    if (body === null || body === undefined) body = {};
    if (!isObject(body)) throw new TypeError(`the body of a new child must be a JSON object, got ${jsonType(body)}`);
    const given = body.metadata ?? {};
    if (!isObject(given)) throw new TypeError(`the metadata of a new child must be a JSON object, got ${jsonType(given)}`);
    const { namespace: _ignored, ...metadata } = { ...given, name };
    if (this.namespace !== undefined) metadata.namespace = this.namespace;
    const { apiVersion: _a, kind: _k, metadata: _m, ...rest } = body;
    return { apiVersion: apiVersion(k), kind: k.kind, metadata, ...rest };
  }
}

// Responses

/** `undefined` when a child has what the host needs, else the mistake. */
function checkChild(child) {
  if (!isObject(child)) return `must be a JSON object, got ${jsonType(child)}`;
  for (const field of ['apiVersion', 'kind']) {
    if (typeof child[field] !== 'string' || child[field] === '') return `has no ${field}`;
  }
  const name = isObject(child.metadata) ? child.metadata.name : undefined;
  if (typeof name !== 'string' || name === '') return `${child.kind} has no metadata.name`;
  return undefined;
}

/** What the host should do for one parent, built with chained calls.
 *
 * `apply` and `status` check cheaply that a child is an object with `apiVersion`, `kind` and
 * `metadata.name`, and that a status is an object. A mistake is a bug in the plugin: the
 * response remembers the first one (`error`) and drops the bad value, and `validate()` throws it
 * as `Terminal`, with the Rust SDK's message (`child #1: has no kind`). */
export class Response {
  constructor() {
    this.children = [];
    this.deletions = [];
    this.statusPatch = null;
    this.conditions = [];
    this.events = [];
    this.requeueAfterMs = undefined;
    this.finalized = false;
    this.error = null;
  }

  /** Desire a child; the host applies it with a controller ownerReference to the parent. */
  apply(child) {
    const index = this.children.length;
    const mistake = checkChild(child);
    if (mistake === undefined) this.children.push(child);
    else this.#fail(`child #${index}: ${mistake}`);
    return this;
  }

  /** Delete a child explicitly: `{ kind, namespace, name }` (the contract's object-ref). */
  delete(objectRef) {
    this.deletions.push(objectRef);
    return this;
  }

  /** Fields of the parent's status (an object); calling it again merges top-level fields. */
  status(fields) {
    if (isObject(fields)) this.statusPatch = { ...this.statusPatch, ...fields };
    else this.#fail(`status must be a JSON object, got ${jsonType(fields)}`);
    return this;
  }

  /** Set a condition on the parent (by type; a later one wins). */
  condition(c) {
    this.conditions = setCondition(this.conditions, c);
    return this;
  }

  /** Record an event about the parent: `type` is `'normal'` or `'warning'`. */
  event(type, reason, action, note) {
    this.events.push({ type, reason, action, note });
    return this;
  }

  /** Reconcile again after `ms` milliseconds even if nothing changes. */
  requeueAfter(ms) {
    this.requeueAfterMs = ms;
    return this;
  }

  /** When finalizing: cleanup is complete and the host may remove its finalizer. */
  finalize() {
    this.finalized = true;
    return this;
  }

  /** The desired child of kind `k` named `name`, or `undefined`. */
  child(k, name) {
    return this.children.find((c) => matchesKind(k, c) && c.metadata.name === name);
  }

  /** The condition of this type, or `undefined`. */
  conditionOf(type) {
    return this.conditions.find((c) => c.type === type);
  }

  /** The response, or throw the first mistake recorded while building it (`Terminal`). */
  validate() {
    if (this.error !== null) throw new Terminal(this.error);
    return this;
  }

  /** The contract's response record (after `validate()`): children and status as JSON text. */
  toContract() {
    this.validate();
    return {
      children: this.children.map((c) => JSON.stringify(c)),
      delete: this.deletions,
      status: this.statusPatch === null ? undefined : JSON.stringify(this.statusPatch),
      conditions: this.conditions,
      events: this.events,
      requeueAfterMs: this.requeueAfterMs === undefined ? undefined : BigInt(this.requeueAfterMs),
      finalized: this.finalized,
    };
  }

  #fail(message) {
    if (this.error === null) this.error = message;
  }
}

// Label selectors

/** Why a label selector did not parse, naming the selector and the requirement. */
export class SelectorError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SelectorError';
  }
}

const isAlnum = (c) => c !== undefined && /^[A-Za-z0-9]$/.test(c);

function isLabelValue(v) {
  return v.length <= 63 && /^[A-Za-z0-9._-]*$/.test(v) && (v === '' || (isAlnum(v[0]) && isAlnum(v[v.length - 1])));
}

function isLabelKey(k) {
  const slash = k.indexOf('/');
  let name = k;
  if (slash >= 0) {
    const prefix = k.slice(0, slash);
    name = k.slice(slash + 1);
    const dns = prefix.length > 0 && prefix.length <= 253 && /^[a-z0-9.-]*$/.test(prefix) && isAlnum(prefix[0]) && isAlnum(prefix[prefix.length - 1]);
    if (!dns) name = '';
  }
  return name !== '' && name.length <= 63 && isLabelValue(name);
}

function splitTopLevel(s) {
  const parts = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i += 1) {
    if (s[i] === '(') depth += 1;
    else if (s[i] === ')') depth -= 1;
    else if (s[i] === ',' && depth === 0) {
      parts.push(s.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(s.slice(start));
  return parts;
}

/** A label selector in kubectl syntax: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`,
 * `k`, `!k`, separated by commas; all must hold, and the empty selector matches everything. */
export class LabelSelector {
  constructor(requirements) {
    this.requirements = requirements;
  }

  /** Parse a selector. Throws `SelectorError` naming the requirement that does not parse. */
  static parse(selector) {
    const requirements = [];
    for (const raw of splitTopLevel(selector)) {
      const req = raw.trim();
      if (req === '') {
        if (selector.trim() === '') continue;
        throw new SelectorError(`label selector ${debug(selector)}: empty key in requirement ${debug(raw)}`);
      }
      requirements.push(requirement(selector, req));
    }
    return new LabelSelector(requirements);
  }

  /** Whether labels (an object, or `undefined`) satisfy every requirement. */
  matches(labels) {
    const get = (k) => (isObject(labels) && typeof labels[k] === 'string' && Object.hasOwn(labels, k) ? labels[k] : undefined);
    return this.requirements.every(({ op, key, value }) => {
      const found = get(key);
      switch (op) {
        case '=':
          return found === value;
        case '!=':
          return found !== value;
        case 'in':
          return found !== undefined && value.has(found);
        case 'notin':
          return !(found !== undefined && value.has(found));
        case 'exists':
          return found !== undefined;
        default:
          return found === undefined;
      }
    });
  }

  /** Whether an object's `metadata.labels` satisfy the selector. */
  matchesObject(object) {
    return this.matches(isObject(object) && isObject(object.metadata) ? object.metadata.labels : undefined);
  }
}

function requirement(selector, req) {
  const invalid = () => new SelectorError(`label selector ${debug(selector)}: invalid label key or value in ${debug(req)}`);
  const malformed = () => new SelectorError(`label selector ${debug(selector)}: malformed set requirement ${debug(req)}`);
  const key = (k) => {
    const trimmed = k.trim();
    if (trimmed === '') throw new SelectorError(`label selector ${debug(selector)}: empty key in requirement ${debug(req)}`);
    if (!isLabelKey(trimmed)) throw invalid();
    return trimmed;
  };
  const value = (v) => {
    const trimmed = v.trim();
    if (!isLabelValue(trimmed)) throw invalid();
    return trimmed;
  };
  const split = (separator) => {
    const at = req.indexOf(separator);
    return at < 0 ? undefined : [req.slice(0, at), req.slice(at + separator.length)];
  };
  const notEquals = split('!=');
  if (notEquals) return { op: '!=', key: key(notEquals[0]), value: value(notEquals[1]) };
  const equals = split('==') ?? split('=');
  if (equals) return { op: '=', key: key(equals[0]), value: value(equals[1]) };
  const space = req.search(/\s/);
  if (space >= 0) {
    const rest = req.slice(space + 1).trimStart();
    let op;
    let setText;
    if (rest.startsWith('notin')) [op, setText] = ['notin', rest.slice(5)];
    else if (rest.startsWith('in')) [op, setText] = ['in', rest.slice(2)];
    else throw invalid();
    let inner = setText.trim();
    if (!(inner.length >= 2 && inner.startsWith('(') && inner.endsWith(')'))) throw malformed();
    inner = inner.slice(1, -1);
    const values = new Set(inner.split(',').map(value));
    if (values.size === 0 || inner.trim() === '') throw malformed();
    return { op, key: key(req.slice(0, space)), value: values };
  }
  if (req.startsWith('!')) return { op: '!', key: key(req.slice(1)) };
  return { op: 'exists', key: key(req) };
}

// Fixtures

/** A lookup the host refuses: a kind the manifest does not declare (`kind not declared in the
 * manifest: v1/Secret`) or a selector that does not parse (`invalid label selector: ...`). A
 * bug in the plugin or its manifest, never transient. */
export class LookupRefused extends Error {
  constructor(message) {
    super(message);
    this.name = 'LookupRefused';
  }
}

function declaredKinds(manifest) {
  const kinds = [];
  if (manifest.parent) kinds.push(manifest.parent.kind && isObject(manifest.parent.kind) ? manifest.parent.kind : manifest.parent);
  kinds.push(...(manifest.children ?? []));
  for (const related of manifest.related ?? []) kinds.push(isObject(related.kind) ? related.kind : related);
  return kinds;
}

const namespaceOf = (object) => (typeof object.metadata?.namespace === 'string' ? object.metadata.namespace : undefined);
const nameOf = (object) => (typeof object.metadata?.name === 'string' ? object.metadata.name : undefined);

/** Lookups answered from a list of objects, for unit tests, the way the host answers from its
 * cache: a `namespace` of `undefined` or `null` reads the parent's namespace (`parentNamespace`,
 * `default` unless given; every namespace for a cluster-scoped parent), selectors are parsed and
 * matched as the host does, lists are ordered by namespace and name, and with a `manifest` (the
 * plugin's `plugin.manifest()`, or `{ parent, scope, children, related }`) kinds it does not
 * declare are refused with `LookupRefused`, as the host refuses them. It does not model the host
 * policy's grants. */
export class Fixture {
  constructor(objects, { manifest, parentNamespace = 'default' } = {}) {
    this.objects = [...objects];
    this.manifest = manifest;
    this.parentNamespace = parentNamespace;
  }

  /** A fixture for this parent object: `namespace` `undefined` reads its namespace. */
  static forParent(parent, objects, { manifest } = {}) {
    return new Fixture(objects, { manifest, parentNamespace: parent.metadata?.namespace });
  }

  #check(k) {
    if (this.manifest !== undefined && !declaredKinds(this.manifest).some((d) => sameKind(d, k))) {
      throw new LookupRefused(`kind not declared in the manifest: ${kindText(k)}`);
    }
  }

  #namespace(namespace) {
    if (namespace !== undefined && namespace !== null) return namespace;
    const scope = this.manifest?.scope ?? this.manifest?.parent?.scope;
    if (scope === 'cluster') return undefined;
    return this.parentNamespace;
  }

  /** The object of kind `k` named `name` (in `namespace`), or `undefined`. */
  get(k, namespace, name) {
    this.#check(k);
    const ns = this.#namespace(namespace);
    return this.objects.find((o) => matchesKind(k, o) && (ns === undefined || namespaceOf(o) === ns) && nameOf(o) === name);
  }

  /** The objects of kind `k` (in `namespace`) whose labels match the selector, ordered by
   * namespace and name. */
  list(k, namespace, labelSelector = '') {
    this.#check(k);
    let selector;
    try {
      selector = LabelSelector.parse(labelSelector);
    } catch (error) {
      throw new LookupRefused(`invalid label selector: ${error.message}`);
    }
    const ns = this.#namespace(namespace);
    const key = (o) => [namespaceOf(o) ?? '', nameOf(o) ?? ''];
    const compare = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
    return this.objects
      .filter((o) => matchesKind(k, o) && (ns === undefined || namespaceOf(o) === ns) && selector.matchesObject(o))
      .sort((a, b) => compare(key(a)[0], key(b)[0]) || compare(key(a)[1], key(b)[1]));
  }
}

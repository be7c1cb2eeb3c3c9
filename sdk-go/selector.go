package wasmop

import (
	"fmt"
	"strings"
	"unicode"
)

// SelectorError is a label selector that does not parse, naming the selector and the
// requirement, with the host's message.
type SelectorError struct {
	Message string
}

func (e *SelectorError) Error() string { return e.Message }

type selectorOp int

const (
	opEquals selectorOp = iota
	opNotEquals
	opIn
	opNotIn
	opExists
	opNotExists
)

type requirement struct {
	op     selectorOp
	key    string
	value  string
	values map[string]bool
}

// LabelSelector is a label selector in kubectl syntax: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
// `k notin (a,b)`, `k`, `!k`, separated by commas. All requirements must hold; the empty
// selector matches everything. It parses and matches as the host does.
type LabelSelector struct {
	requirements []requirement
}

// every is whether every byte of s satisfies ok. (No regexp: package-level regexps would be
// compiled at every instantiation of the component, that is on every call.)
func every(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

func isAlnum(b byte) bool {
	return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
}

func isLabelValue(v string) bool {
	valueByte := func(b byte) bool { return isAlnum(b) || b == '.' || b == '_' || b == '-' }
	return len(v) <= 63 && every(v, valueByte) && (v == "" || (isAlnum(v[0]) && isAlnum(v[len(v)-1])))
}

func isLabelKey(k string) bool {
	name := k
	if prefix, rest, found := strings.Cut(k, "/"); found {
		name = rest
		if prefix == "" || len(prefix) > 253 || !every(prefix, func(b byte) bool { return (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') || b == '.' || b == '-' }) || !isAlnum(prefix[0]) || !isAlnum(prefix[len(prefix)-1]) {
			return false
		}
	}
	return name != "" && len(name) <= 63 && isLabelValue(name)
}

// splitTopLevel splits s at commas outside parentheses.
func splitTopLevel(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// ParseLabelSelector parses a selector.
//
// The error is a *[SelectorError] naming the requirement that does not parse.
func ParseLabelSelector(selector string) (LabelSelector, error) {
	var out LabelSelector
	for _, raw := range splitTopLevel(selector) {
		req := strings.TrimSpace(raw)
		if req == "" {
			if strings.TrimSpace(selector) == "" {
				continue
			}
			return LabelSelector{}, &SelectorError{fmt.Sprintf("label selector %s: empty key in requirement %s", quote(selector), quote(raw))}
		}
		r, err := parseRequirement(selector, req)
		if err != nil {
			return LabelSelector{}, err
		}
		out.requirements = append(out.requirements, r)
	}
	return out, nil
}

func parseRequirement(selector, req string) (requirement, error) {
	invalid := &SelectorError{fmt.Sprintf("label selector %s: invalid label key or value in %s", quote(selector), quote(req))}
	malformed := &SelectorError{fmt.Sprintf("label selector %s: malformed set requirement %s", quote(selector), quote(req))}
	key := func(k string) (string, error) {
		k = strings.TrimSpace(k)
		if k == "" {
			return "", &SelectorError{fmt.Sprintf("label selector %s: empty key in requirement %s", quote(selector), quote(req))}
		}
		if !isLabelKey(k) {
			return "", invalid
		}
		return k, nil
	}
	value := func(v string) (string, error) {
		v = strings.TrimSpace(v)
		if !isLabelValue(v) {
			return "", invalid
		}
		return v, nil
	}
	pair := func(op selectorOp, k, v string) (requirement, error) {
		k, err := key(k)
		if err != nil {
			return requirement{}, err
		}
		v, err = value(v)
		if err != nil {
			return requirement{}, err
		}
		return requirement{op: op, key: k, value: v}, nil
	}
	if k, v, found := strings.Cut(req, "!="); found {
		return pair(opNotEquals, k, v)
	}
	if k, v, found := strings.Cut(req, "=="); found {
		return pair(opEquals, k, v)
	}
	if k, v, found := strings.Cut(req, "="); found {
		return pair(opEquals, k, v)
	}
	if space := strings.IndexFunc(req, unicode.IsSpace); space >= 0 {
		rest := strings.TrimLeftFunc(req[space+1:], unicode.IsSpace)
		var op selectorOp
		var set string
		switch {
		case strings.HasPrefix(rest, "notin"):
			op, set = opNotIn, rest[len("notin"):]
		case strings.HasPrefix(rest, "in"):
			op, set = opIn, rest[len("in"):]
		default:
			return requirement{}, invalid
		}
		inner := strings.TrimSpace(set)
		if len(inner) < 2 || inner[0] != '(' || inner[len(inner)-1] != ')' {
			return requirement{}, malformed
		}
		inner = inner[1 : len(inner)-1]
		if strings.TrimSpace(inner) == "" {
			return requirement{}, malformed
		}
		values := map[string]bool{}
		for _, v := range strings.Split(inner, ",") {
			v, err := value(v)
			if err != nil {
				return requirement{}, err
			}
			values[v] = true
		}
		k, err := key(req[:space])
		if err != nil {
			return requirement{}, err
		}
		return requirement{op: op, key: k, values: values}, nil
	}
	if strings.HasPrefix(req, "!") {
		k, err := key(req[1:])
		return requirement{op: opNotExists, key: k}, err
	}
	k, err := key(req)
	return requirement{op: opExists, key: k}, err
}

// Matches is whether labels satisfy every requirement.
func (s LabelSelector) Matches(labels map[string]string) bool {
	for _, r := range s.requirements {
		found, ok := labels[r.key]
		var holds bool
		switch r.op {
		case opEquals:
			holds = ok && found == r.value
		case opNotEquals:
			holds = !ok || found != r.value
		case opIn:
			holds = ok && r.values[found]
		case opNotIn:
			holds = !(ok && r.values[found])
		case opExists:
			holds = ok
		case opNotExists:
			holds = !ok
		}
		if !holds {
			return false
		}
	}
	return true
}

// MatchesObject is whether an object's `metadata.labels` satisfy the selector.
func (s LabelSelector) MatchesObject(o Object) bool { return s.Matches(o.Labels()) }

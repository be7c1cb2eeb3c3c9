package wasmop

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"
)

// vectors are the shared test vectors (guest-sdk/vectors/sdk.json) that the Rust SDK, the
// Python and JavaScript modules and this package all pass, so the languages cannot drift.
type vectors struct {
	Quantity struct {
		Parse []struct {
			Text   string
			Nanos  string
			Units  *int64
			Millis *int64
		}
		Errors  []struct{ Text, Error string }
		Compare []struct {
			A, B  string
			Order int
		}
		JSON []struct {
			Value json.RawMessage
			Text  string
			Error *string
		}
	}
	Selector struct {
		Labels  map[string]string
		Matches []struct {
			Selector string
			Matches  bool
		}
		Errors []struct{ Selector, Error string }
	}
	Conditions struct {
		Set []struct {
			About      string
			Set        []Condition
			Conditions []Condition
		}
		Merge []struct {
			About      string
			Existing   []ShownCondition
			Updates    []Condition
			Generation *int64
			Now        string
			Conditions json.RawMessage
		}
	}
	Response struct {
		Children []struct {
			Apply   []json.RawMessage
			Applied []string
			Error   *string
		}
		Status []struct {
			Status []json.RawMessage
			Patch  json.RawMessage
			Error  *string
		}
	}
	Failure []struct {
		About      string
		Retryable  bool
		Message    string
		Status     []json.RawMessage
		Conditions []Condition
		Shown      struct {
			Message    string
			Status     json.RawMessage
			Conditions []Condition
		}
	}
	Fixture struct {
		Manifest struct {
			Parent   kindJSON
			Scope    string
			Children []kindJSON
			Related  []struct {
				Kind          kindJSON
				LabelSelector string
			}
		}
		Objects []json.RawMessage
		Lookups []struct {
			About     string
			Op        string
			Kind      kindJSON
			Namespace *string
			Name      string
			Selector  string
			Found     []string
			Error     *string
		}
	}
}

type kindJSON struct{ Group, Version, Kind string }

func (k kindJSON) kind() Kind { return NewKind(k.Group, k.Version, k.Kind) }

func loadVectors(t *testing.T) vectors {
	t.Helper()
	text, err := os.ReadFile("../guest-sdk/vectors/sdk.json")
	if err != nil {
		t.Fatalf("the shared vectors: %v", err)
	}
	var v vectors
	if err := json.Unmarshal(text, &v); err != nil {
		t.Fatalf("the shared vectors: %v", err)
	}
	if len(v.Quantity.Parse) == 0 || len(v.Fixture.Lookups) == 0 || len(v.Failure) == 0 {
		t.Fatal("the shared vectors are empty")
	}
	return v
}

// decoded is a JSON text as generic values, for comparisons that ignore key order.
func decoded(t *testing.T, text []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(text, &v); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return v
}

func sameJSON(t *testing.T, got any, want []byte) bool {
	t.Helper()
	text, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(decoded(t, text), decoded(t, want))
}

func anyOf(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	return decoded(t, raw)
}

func TestQuantitiesParseToExactNanosAndRoundUpToUnitsAndMillis(t *testing.T) {
	for _, c := range loadVectors(t).Quantity.Parse {
		q, err := ParseQuantity(c.Text)
		if err != nil {
			t.Errorf("%s: %v", c.Text, err)
			continue
		}
		if q.Nanos().String() != c.Nanos || q.String() != c.Text {
			t.Errorf("%s: nanos %s", c.Text, q.Nanos())
		}
		for what, pair := range map[string][2]any{"units": {c.Units}, "millis": {c.Millis}} {
			want := pair[0].(*int64)
			var got int64
			var ok bool
			if what == "units" {
				got, ok = q.UnitsCeil()
			} else {
				got, ok = q.MillisCeil()
			}
			if ok != (want != nil) || (ok && got != *want) {
				t.Errorf("%s: %s %d %v", c.Text, what, got, ok)
			}
		}
	}
}

func TestMalformedAndHugeQuantitiesAreRefusedNamingTheText(t *testing.T) {
	for _, c := range loadVectors(t).Quantity.Errors {
		_, err := ParseQuantity(c.Text)
		var q *QuantityError
		if !errors.As(err, &q) || err.Error() != c.Error {
			t.Errorf("%q: %v, want %s", c.Text, err, c.Error)
		}
	}
}

func TestQuantitiesCompareByValueWhateverTheSuffix(t *testing.T) {
	for _, c := range loadVectors(t).Quantity.Compare {
		a, b := MustParseQuantity(c.A), MustParseQuantity(c.B)
		if a.Cmp(b) != c.Order || a.Equal(b) != (c.Order == 0) {
			t.Errorf("%s %s: %d", c.A, c.B, a.Cmp(b))
		}
	}
}

func TestQuantitiesInJSONAreStringsOrIntegers(t *testing.T) {
	for _, c := range loadVectors(t).Quantity.JSON {
		var q Quantity
		err := json.Unmarshal(c.Value, &q)
		if c.Error != nil {
			if err == nil || err.Error() != *c.Error {
				t.Errorf("%s: %v", c.Value, err)
			}
			continue
		}
		if err != nil || q.String() != c.Text {
			t.Errorf("%s: %v %v", c.Value, q, err)
		}
		if text, _ := json.Marshal(q); string(text) != quote(c.Text) {
			t.Errorf("%s encodes as %s", c.Value, text)
		}
	}
}

func TestSelectorsMatchLabelsAsTheHostDoes(t *testing.T) {
	v := loadVectors(t).Selector
	for _, c := range v.Matches {
		s, err := ParseLabelSelector(c.Selector)
		if err != nil || s.Matches(v.Labels) != c.Matches {
			t.Errorf("%q: %v", c.Selector, err)
		}
	}
}

func TestBadSelectorsAreRefusedNamingTheRequirement(t *testing.T) {
	for _, c := range loadVectors(t).Selector.Errors {
		_, err := ParseLabelSelector(c.Selector)
		var s *SelectorError
		if !errors.As(err, &s) || err.Error() != c.Error {
			t.Errorf("%q: %v, want %s", c.Selector, err, c.Error)
		}
	}
}

func TestALaterConditionOfATypeReplacesTheEarlierOneAndGoesLast(t *testing.T) {
	for _, c := range loadVectors(t).Conditions.Set {
		var r Response
		for _, next := range c.Set {
			r.SetCondition(next)
		}
		if !reflect.DeepEqual(r.Conditions, c.Conditions) {
			t.Errorf("%s: %+v", c.About, r.Conditions)
		}
		f := Terminalf("x")
		for _, next := range c.Set {
			f = f.WithCondition(next)
		}
		if !reflect.DeepEqual(f.Conditions, c.Conditions) {
			t.Errorf("%s (failure): %+v", c.About, f.Conditions)
		}
	}
}

func TestMergedConditionsCarryObservedGenerationAndStableTransitionTimes(t *testing.T) {
	for _, c := range loadVectors(t).Conditions.Merge {
		if got := MergeConditions(c.Existing, c.Updates, c.Generation, c.Now); !sameJSON(t, got, c.Conditions) {
			t.Errorf("%s: %+v", c.About, got)
		}
		parent := Object{"metadata": map[string]any{"name": "p"}, "status": map[string]any{"conditions": c.Existing}}
		if c.Generation != nil {
			parent["metadata"].(map[string]any)["generation"] = json.Number(jsonInt(*c.Generation))
		}
		if got := ShownConditions(parent, c.Updates, c.Now); !sameJSON(t, got, c.Conditions) {
			t.Errorf("%s (from the parent): %+v", c.About, got)
		}
	}
}

func jsonInt(n int64) string { text, _ := json.Marshal(n); return string(text) }

func TestChildrenOfTheWrongShapeAreDroppedAndTheFirstNamed(t *testing.T) {
	for _, c := range loadVectors(t).Response.Children {
		var r Response
		for _, child := range c.Apply {
			r.Apply(anyOf(t, child))
		}
		var applied []string
		for _, child := range r.Children {
			o, _ := ToObject(child)
			applied = append(applied, o.Name())
		}
		if len(applied) != len(c.Applied) || (len(applied) > 0 && !reflect.DeepEqual(applied, c.Applied)) {
			t.Errorf("applied %v, want %v", applied, c.Applied)
		}
		err := r.Validate()
		if c.Error == nil {
			if err != nil {
				t.Errorf("%v", err)
			}
			continue
		}
		if f := AsFailure(err); f == nil || f.Retryable || f.Message != *c.Error {
			t.Errorf("%v, want terminal %s", err, *c.Error)
		}
		// The same mistake in a response built as a literal is found too.
		literal := Response{Children: nil}
		for _, child := range c.Apply {
			literal.Children = append(literal.Children, anyOf(t, child))
		}
		if f := AsFailure(literal.Validate()); f == nil || f.Message != *c.Error {
			t.Errorf("literal: %v, want %s", f, *c.Error)
		}
	}
}

func TestStatusMustBeAnObjectAndMerges(t *testing.T) {
	for _, c := range loadVectors(t).Response.Status {
		var r Response
		for _, fields := range c.Status {
			r.SetStatus(anyOf(t, fields))
		}
		if !sameJSON(t, r.Status, c.Patch) {
			t.Errorf("status %v, want %s", r.Status, c.Patch)
		}
		err := r.Validate()
		if (c.Error == nil) != (err == nil) || (err != nil && err.Error() != *c.Error) {
			t.Errorf("%v, want %v", err, c.Error)
		}
	}
}

func TestAFailureCarriesWhatTheParentShows(t *testing.T) {
	for _, c := range loadVectors(t).Failure {
		f := Terminalf("%s", c.Message)
		if c.Retryable {
			f = Retryablef("%s", c.Message)
		}
		for _, fields := range c.Status {
			f = f.WithStatus(anyOf(t, fields))
		}
		for _, next := range c.Conditions {
			f = f.WithCondition(next)
		}
		message, status, conditions := f.Shown()
		if f.Retryable != c.Retryable || message != c.Shown.Message {
			t.Errorf("%s: %q", c.About, message)
		}
		if !sameJSON(t, status, c.Shown.Status) {
			t.Errorf("%s: status %v", c.About, status)
		}
		if len(conditions) != len(c.Shown.Conditions) || (len(conditions) > 0 && !reflect.DeepEqual(conditions, c.Shown.Conditions)) {
			t.Errorf("%s: conditions %+v", c.About, conditions)
		}
	}
}

func fixtureOf(t *testing.T, scope Scope) *FixtureCache {
	t.Helper()
	v := loadVectors(t).Fixture
	manifest := Manifest{Parent: v.Manifest.Parent.kind(), Scope: scope}
	for _, k := range v.Manifest.Children {
		manifest.Children = append(manifest.Children, k.kind())
	}
	for _, r := range v.Manifest.Related {
		manifest.Related = append(manifest.Related, RelatedKind{Kind: r.Kind.kind(), LabelSelector: r.LabelSelector})
	}
	var objects []Object
	for _, raw := range v.Objects {
		o, err := ParseObject(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		objects = append(objects, o)
	}
	return NewFixtureCache(objects...).RestrictTo(manifest)
}

func names(objects []Object) []string {
	out := []string{}
	for _, o := range objects {
		out = append(out, o.Namespace()+"/"+o.Name())
	}
	return out
}

func TestLookupsAnswerAsTheHostAndRefuseUndeclaredKinds(t *testing.T) {
	cache := fixtureOf(t, Namespaced)
	for _, c := range loadVectors(t).Fixture.Lookups {
		namespace := ""
		if c.Namespace != nil {
			namespace = *c.Namespace
		}
		var found []Object
		var err error
		if c.Op == "get" {
			var o Object
			var ok bool
			o, ok, err = cache.Get(c.Kind.kind(), namespace, c.Name)
			if ok {
				found = []Object{o}
			}
		} else {
			found, err = cache.List(c.Kind.kind(), namespace, c.Selector)
		}
		if c.Error != nil {
			var lookup *LookupError
			if !errors.As(err, &lookup) || err.Error() != *c.Error {
				t.Errorf("%s: %v, want %s", c.About, err, *c.Error)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(names(found), append([]string{}, c.Found...)) {
			t.Errorf("%s: %v %v, want %v", c.About, names(found), err, c.Found)
		}
	}
}

func TestAClusterScopedParentReadsEveryNamespace(t *testing.T) {
	pods, err := fixtureOf(t, Cluster).List(NewKind("", "v1", "Pod"), "", "app=web")
	want := []string{"default/web-1", "default/web-2", "other/web-1"}
	if err != nil || !reflect.DeepEqual(names(pods), want) {
		t.Errorf("%v %v", names(pods), err)
	}
}

package wasmop

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// QuantityReason says why a text is not a quantity.
type QuantityReason int

const (
	// QuantityMalformed: not a number with an optional suffix.
	QuantityMalformed QuantityReason = iota
	// QuantityOutOfRange: too large to hold (more than about 10^29).
	QuantityOutOfRange
)

// QuantityError is a text that is not a Kubernetes quantity, with the Rust SDK's message.
type QuantityError struct {
	Reason QuantityReason
	// Text is the text as given.
	Text string
}

func (e *QuantityError) Error() string {
	if e.Reason == QuantityMalformed {
		return fmt.Sprintf("%s is not a quantity: write a number with an optional suffix, like 1Gi, 500m, 1.5 or 2e3", quote(e.Text))
	}
	return fmt.Sprintf("quantity %s is out of range", quote(e.Text))
}

// Quantity is a Kubernetes resource quantity (`resource.Quantity`): a storage size, a CPU
// amount, a count. It is kept exactly, in billionths; finer fractions round up, as Kubernetes
// does. Quantities compare by value whatever their suffix ([Quantity.Cmp]), and
// [Quantity.String] is the text as written. In JSON a quantity is a string, or an integer (as
// `x-kubernetes-int-or-string` allows).
type Quantity struct {
	text  string
	nanos *big.Int
}

var (
	i128Max = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1))
	billion = big.NewInt(1_000_000_000)
	million = big.NewInt(1_000_000)
	ten     = big.NewInt(10)
)

var decimalSuffixes = map[string]int{"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
var binarySuffixes = []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}

// suffixScale is the power of two and the power of ten of a suffix, and whether it is one.
func suffixScale(suffix string) (binaryPower, decimalExponent int, ok bool) {
	for i, s := range binarySuffixes {
		if s == suffix {
			return 10 * (i + 1), 0, true
		}
	}
	if e, found := decimalSuffixes[suffix]; found {
		return 0, e, true
	}
	if suffix == "" || (suffix[0] != 'e' && suffix[0] != 'E') {
		return 0, 0, false
	}
	exponent := suffix[1:]
	digits := strings.TrimLeft(exponent, "+-")
	if len(exponent)-len(digits) > 1 || digits == "" || len(digits) > 4 || strings.Trim(digits, "0123456789") != "" {
		return 0, 0, false
	}
	e, err := strconv.Atoi(exponent)
	return 0, e, err == nil
}

// ParseQuantity parses a quantity in Kubernetes syntax (`1Gi`, `500m`, `1.5`, `2e3`).
//
// The error is a *[QuantityError] naming the text.
func ParseQuantity(text string) (Quantity, error) {
	malformed := &QuantityError{Reason: QuantityMalformed, Text: text}
	outOfRange := &QuantityError{Reason: QuantityOutOfRange, Text: text}
	unsigned, negative := text, false
	if text != "" && (text[0] == '-' || text[0] == '+') {
		negative, unsigned = text[0] == '-', text[1:]
	}
	n := 0
	for n < len(unsigned) && (unsigned[n] == '.' || (unsigned[n] >= '0' && unsigned[n] <= '9')) {
		n++
	}
	number, suffix := unsigned[:n], unsigned[n:]
	whole, fraction, _ := strings.Cut(number, ".")
	if (whole == "" && fraction == "") || strings.Contains(fraction, ".") {
		return Quantity{}, malformed
	}
	digits := strings.TrimLeft(whole+fraction, "0")
	if len(digits) > 30 {
		return Quantity{}, outOfRange
	}
	mantissa := new(big.Int)
	if digits != "" {
		mantissa.SetString(digits, 10)
	}
	binaryPower, decimalExponent, ok := suffixScale(suffix)
	if !ok {
		return Quantity{}, malformed
	}
	exponent := decimalExponent + 9 - len(fraction)
	scaled := new(big.Int).Lsh(mantissa, uint(binaryPower))
	if scaled.Cmp(i128Max) > 0 {
		return Quantity{}, outOfRange
	}
	nanos := new(big.Int)
	switch {
	case exponent >= 0:
		if exponent > 38 {
			return Quantity{}, outOfRange
		}
		nanos.Mul(scaled, new(big.Int).Exp(ten, big.NewInt(int64(exponent)), nil))
		if nanos.Cmp(i128Max) > 0 {
			return Quantity{}, outOfRange
		}
	case -exponent > 38:
		if scaled.Sign() > 0 {
			nanos.SetInt64(1)
		}
	default:
		divisor := new(big.Int).Exp(ten, big.NewInt(int64(-exponent)), nil)
		nanos.Add(scaled, divisor).Sub(nanos, big.NewInt(1)).Quo(nanos, divisor)
	}
	if negative {
		nanos.Neg(nanos)
	}
	return Quantity{text: text, nanos: nanos}, nil
}

// MustParseQuantity is [ParseQuantity] for constants in code and tests; it panics on a text
// that is not a quantity.
func MustParseQuantity(text string) Quantity {
	q, err := ParseQuantity(text)
	if err != nil {
		panic(err)
	}
	return q
}

// String is the quantity as written.
func (q Quantity) String() string { return q.text }

// Nanos is the value in billionths, exactly.
func (q Quantity) Nanos() *big.Int {
	if q.nanos == nil {
		return new(big.Int)
	}
	return new(big.Int).Set(q.nanos)
}

// ceilDiv is n / d rounded up, for d > 0, and whether it fits in 64 bits.
func ceilDiv(n, d *big.Int) (int64, bool) {
	q, r := new(big.Int).QuoRem(n, d, new(big.Int))
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return 0, false
	}
	return q.Int64(), true
}

// UnitsCeil is the value in whole units, rounded up (`1.5` is 2, `100m` is 1), like
// Kubernetes' `Quantity.Value()`; false beyond a 64-bit integer.
func (q Quantity) UnitsCeil() (int64, bool) { return ceilDiv(q.Nanos(), billion) }

// MillisCeil is the value in thousandths, rounded up (`0.5` is 500), like
// `Quantity.MilliValue()`; false beyond a 64-bit integer.
func (q Quantity) MillisCeil() (int64, bool) { return ceilDiv(q.Nanos(), million) }

// Cmp is -1, 0 or 1: this quantity's value against other's (`1Ki` equals `1024`).
func (q Quantity) Cmp(other Quantity) int { return q.Nanos().Cmp(other.Nanos()) }

// Equal is whether both hold the same value.
func (q Quantity) Equal(other Quantity) bool { return q.Cmp(other) == 0 }

// MarshalJSON writes the quantity as written, a string.
func (q Quantity) MarshalJSON() ([]byte, error) { return json.Marshal(q.text) }

// UnmarshalJSON reads a string or an integer.
func (q *Quantity) UnmarshalJSON(data []byte) error {
	var text string
	if err := json.Unmarshal(data, &text); err != nil {
		var number json.Number
		if json.Unmarshal(data, &number) != nil {
			return &QuantityError{Reason: QuantityMalformed, Text: string(data)}
		}
		if _, err := number.Int64(); err != nil {
			return &QuantityError{Reason: QuantityMalformed, Text: string(data)}
		}
		text = number.String()
	}
	parsed, err := ParseQuantity(text)
	if err != nil {
		return err
	}
	*q = parsed
	return nil
}

// quote is text quoted as the Rust SDK's messages quote it (JSON string syntax).
func quote(text string) string {
	out, _ := json.Marshal(text)
	return string(out)
}

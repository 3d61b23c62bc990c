package facts

import (
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Amounts are kept as integers of micro-units (1e-6 of the currency), so
// sums are exact and do not depend on the order of addition.
const microPerUnit = 1_000_000

// maxMicro bounds one amount: about 9e9 currency units. Larger amounts
// (and sums that would overflow) are not counted.
const maxMicro = math.MaxInt64 / 1024

// ParseAmount reads the decimal text of a JSON number ("19.99", "-5",
// "1e3") as micro-units, rounded half away from zero. ok is false for text
// that is not a number or is out of range.
func ParseAmount(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	// Fast path: plain decimals without exponent.
	if !strings.ContainsAny(s, "eE") {
		neg := false
		t := s
		if t[0] == '-' {
			neg, t = true, t[1:]
		}
		ip, fp, _ := strings.Cut(t, ".")
		if ip == "" || len(ip) > 13 || !digits(ip) || !digits(fp) {
			return parseSlow(s)
		}
		v, _ := strconv.ParseInt(ip, 10, 64)
		v *= microPerUnit
		frac := fp
		if len(frac) > 6 {
			frac = fp[:6]
		}
		if frac != "" {
			f, _ := strconv.ParseInt(frac, 10, 64)
			for i := len(frac); i < 6; i++ {
				f *= 10
			}
			v += f
		}
		if len(fp) > 6 && fp[6] >= '5' {
			v++
		}
		if v > maxMicro {
			return 0, false
		}
		if neg {
			v = -v
		}
		return v, true
	}
	return parseSlow(s)
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func parseSlow(s string) (int64, bool) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, false
	}
	r.Mul(r, big.NewRat(microPerUnit, 1))
	f, _ := r.Float64()
	if math.IsNaN(f) || math.Abs(f) > maxMicro {
		return 0, false
	}
	return int64(math.Round(f)), true
}

// FormatAmount writes micro-units as a decimal without trailing zeros:
// 19990000 -> "19.99", 5000000 -> "5".
func FormatAmount(v int64) string {
	neg := v < 0
	if neg {
		v = -v
	}
	ip := v / microPerUnit
	fp := v % microPerUnit
	s := strconv.FormatInt(ip, 10)
	if fp != 0 {
		f := strconv.FormatInt(fp+microPerUnit, 10)[1:]
		s += "." + strings.TrimRight(f, "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

// Money is an amount per currency: a short list sorted by currency, never
// summed across currencies.
type Money []Amount

// Amount is one currency's amount in micro-units.
type Amount struct {
	Currency string
	Micro    int64
}

// Add adds v micro-units of currency cur, ignoring an addition that would
// overflow.
func (m *Money) Add(cur string, v int64) {
	for i := range *m {
		if (*m)[i].Currency == cur {
			s := (*m)[i].Micro + v
			if s > maxMicro || s < -maxMicro {
				return
			}
			(*m)[i].Micro = s
			return
		}
	}
	*m = append(*m, Amount{Currency: cur, Micro: v})
	slices.SortFunc(*m, func(a, b Amount) int { return strings.Compare(a.Currency, b.Currency) })
}

// AddAll adds every amount of o.
func (m *Money) AddAll(o Money) {
	for _, a := range o {
		m.Add(a.Currency, a.Micro)
	}
}

// Of returns the amount in currency cur.
func (m Money) Of(cur string) int64 {
	for _, a := range m {
		if a.Currency == cur {
			return a.Micro
		}
	}
	return 0
}

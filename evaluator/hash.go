package evaluator

const (
	fnvOffset = 0x811c9dc5
	fnvPrime  = 0x01000193
)

// Fnv1a32 is the 32-bit FNV-1a hash of the bytes of s (UTF-8 for text).
func Fnv1a32(s string) uint32 {
	return fnvAdd(fnvOffset, s)
}

func fnvAdd(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= fnvPrime
	}
	return h
}

// Bucket is bucket(seed, salt, unit) of the specification: the FNV-1a hash
// of the ASCII decimal text of fnv1a32(seed+salt+unit), modulo 10,000.
// It is GrowthBook's version-2 hash (times 10,000) of seed+salt and unit for
// ASCII text; GrowthBook hashes UTF-16 code units where this hashes UTF-8.
func Bucket(seed, salt, unit string) uint32 {
	return outerBucket(fnvAdd(fnvAdd(fnvAdd(fnvOffset, seed), salt), unit))
}

// bucketPair returns the share and variant buckets of unit from the FNV
// states after seed+".r" and seed+".v". The two hash chains are independent
// and run side by side, so the pair costs little more than one bucket.
func bucketPair(share, variant uint32, unit string) (uint32, uint32) {
	// Four bytes a turn: every turn of a loop costs a jump through a table
	// in Go's WebAssembly code.
	i := 0
	for ; i+4 <= len(unit); i += 4 {
		u := unit[i : i+4]
		c0, c1, c2, c3 := uint32(u[0]), uint32(u[1]), uint32(u[2]), uint32(u[3])
		share = ((((share^c0)*fnvPrime^c1)*fnvPrime^c2)*fnvPrime ^ c3) * fnvPrime
		variant = ((((variant^c0)*fnvPrime^c1)*fnvPrime^c2)*fnvPrime ^ c3) * fnvPrime
	}
	for ; i < len(unit); i++ {
		c := uint32(unit[i])
		share = (share ^ c) * fnvPrime
		variant = (variant ^ c) * fnvPrime
	}
	var ds, dv [10]byte
	is, iv := decimal(&ds, share), decimal(&dv, variant)
	hs, hv := uint32(fnvOffset), uint32(fnvOffset)
	for is < 10 && iv < 10 {
		hs = (hs ^ uint32(ds[is])) * fnvPrime
		hv = (hv ^ uint32(dv[iv])) * fnvPrime
		is++
		iv++
	}
	for ; is < 10; is++ {
		hs = (hs ^ uint32(ds[is])) * fnvPrime
	}
	for ; iv < 10; iv++ {
		hv = (hv ^ uint32(dv[iv])) * fnvPrime
	}
	return hs % 10000, hv % 10000
}

// outerBucket hashes the decimal text of inner, modulo 10,000.
func outerBucket(inner uint32) uint32 {
	var d [10]byte
	h := uint32(fnvOffset)
	for i := decimal(&d, inner); i < 10; i++ {
		h = (h ^ uint32(d[i])) * fnvPrime
	}
	return h % 10000
}

const digitPairs = "00010203040506070809101112131415161718192021222324252627282930313233343536373839" +
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879" +
	"8081828384858687888990919293949596979899"

// decimal writes v in decimal at the end of d and returns where it starts.
func decimal(d *[10]byte, v uint32) int {
	i := 10
	for v >= 100 {
		q := v / 100
		r := (v - q*100) * 2
		i -= 2
		d[i], d[i+1] = digitPairs[r], digitPairs[r+1]
		v = q
	}
	if v >= 10 {
		i -= 2
		d[i], d[i+1] = digitPairs[v*2], digitPairs[v*2+1]
	} else {
		i--
		d[i] = byte('0' + v)
	}
	return i
}

// Why an id is not usable; idUsable when it is.
type idState uint8

const (
	idAbsent idState = iota
	idNotString
	idTooLong
	idPlaceholder
	idUsable
)

func (s idState) String() string {
	switch s {
	case idAbsent:
		return "absent"
	case idNotString:
		return "not a string"
	case idTooLong:
		return "longer than 256 UTF-16 code units"
	case idPlaceholder:
		return "blank or a placeholder"
	}
	return "usable"
}

// placeholders are the ids the specification stores as empty.
var placeholders = [...]string{
	"undefined", "null", "none", "nan", "0", "true", "false", "anonymous",
	"guest", "id", "email", "distinct_id", "distinctid", "not_authenticated",
	"[object object]",
}

// UsableID reports whether id is usable as a unit: at most 256 UTF-16 code
// units, and not blank or a placeholder once ASCII letters are lower-cased
// and spaces, tabs, line feeds, carriage returns and quotes are trimmed from
// both ends. A usable id is used (and hashed) as it is, never trimmed.
func UsableID(id string) bool {
	return checkID(id) == idUsable
}

func checkID(id string) idState {
	if len(id) > 256 { // UTF-8 never has fewer bytes than UTF-16 has code units
		units := 0
		for _, r := range id {
			units++
			if r >= 0x10000 {
				units++
			}
		}
		if units > 256 {
			return idTooLong
		}
	}
	lo, hi := 0, len(id)
	for lo < hi && isTrimmed(id[lo]) {
		lo++
	}
	for hi > lo && isTrimmed(id[hi-1]) {
		hi--
	}
	bare := id[lo:hi]
	if bare == "" {
		return idPlaceholder
	}
	if len(bare) > len("not_authenticated") {
		return idUsable
	}
	// Only a few lengths can be a placeholder; most ids are none of them
	// and need no lower-casing (calls and loops are dear in WebAssembly).
	switch len(bare) {
	case 1, 2, 3, 4, 5, 9, 10, 11, 15, 17:
	default:
		return idUsable
	}
	var low [len("not_authenticated")]byte
	for i := 0; i < len(bare); i++ {
		c := bare[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		low[i] = c
	}
	for _, p := range placeholders {
		if string(low[:len(bare)]) == p {
			return idPlaceholder
		}
	}
	return idUsable
}

func isTrimmed(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\''
}

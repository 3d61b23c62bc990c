package api

import "slices"

// refPrefixes narrows the search for a ref in a sorted slice of refs to
// the refs that share its first two bytes: entry k is the index of the
// first ref whose 16-bit prefix is k or more (1<<16+1 entries, 256 KiB).
// Refs are hashes (UserRef, BrowserRef), so a million of them put about
// 15 in each range, and a lookup reads a line or two of the table and of
// the refs instead of the twenty scattered reads of a binary search over
// all of them: the person of every visit and event is looked up when a
// day is decoded (Person), which made a tenth of the first overview's
// time at 10M events. A nil refPrefixes searches the whole slice.
type refPrefixes []int32

// newRefPrefixes indexes refs, sorted by compareRef; nil for no refs.
func newRefPrefixes(refs []ref) refPrefixes {
	if len(refs) == 0 {
		return nil
	}
	p := make(refPrefixes, 1<<16+1)
	k := 0
	for i, r := range refs {
		for pre := refPrefix(r); k <= pre; k++ {
			p[k] = int32(i)
		}
	}
	for ; k < len(p); k++ {
		p[k] = int32(len(refs))
	}
	return p
}

// refPrefix is the first two bytes of r, big-endian.
func refPrefix(r ref) int { return int(r[0])<<8 | int(r[1]) }

// find returns the index of r in refs (the slice p was built from) and
// whether it is there; when not, the index where it would go.
func (p refPrefixes) find(refs []ref, r ref) (int, bool) {
	lo, hi := 0, len(refs)
	if p != nil {
		k := refPrefix(r)
		lo, hi = int(p[k]), int(p[k+1])
	}
	i, ok := slices.BinarySearchFunc(refs[lo:hi], r, compareRef)
	return lo + i, ok
}

package api

import "math/bits"

// Columns of the person index that whole-window counts read for every
// active person: dense, in person order, so that counting the known and
// the new people of an overview reads 8 bytes and a bit per person in
// ascending order instead of a 100-byte row at random.

// indexColumns builds the columns of d.People.
func (d *projectData) indexColumns() {
	d.known = newBitset(len(d.People))
	d.firstSeen = make([]int64, len(d.People))
	for i := range d.People {
		p := &d.People[i]
		if p.Known {
			d.known.add(int32(i))
		}
		d.firstSeen[i] = p.FirstSeen
	}
}

// knownAndNew counts the people of set who are known, and those first
// seen in [lo, hi) (Unix ms).
func (d *projectData) knownAndNew(set bitset, lo, hi int64) (known, fresh int) {
	if len(d.firstSeen) != len(d.People) { // built by hand, not loaded
		d.indexColumns()
	}
	for i, w := range set {
		known += bits.OnesCount64(w & d.known[i])
	}
	fs := d.firstSeen
	set.each(func(i int32) {
		if t := fs[i]; t >= lo && t < hi {
			fresh++
		}
	})
	return known, fresh
}

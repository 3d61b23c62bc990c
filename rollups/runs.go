package rollups

// Each data file is sorted by its table's sort key (Store.Write sorts
// before it writes), so the rows of several files, read as one record
// each, are sorted runs: merging them costs about log2(runs) comparisons
// a row, where sorting them all costs about log2(rows). The keyed read of
// a partition (liveRows) orders every file's rows this way.

// runBounds returns where each record's rows start in order (sortedOrder's
// rows, record after record) and, last, len(order), when every record's
// rows are in sort-key order; nil when one is not.
func runBounds(c *sortKeyCmp, order []rowRef, recs int) []int {
	bounds := make([]int, 0, recs+1)
	for i := range order {
		if i == 0 || order[i].src != order[i-1].src {
			bounds = append(bounds, i)
		} else if c.compare(order[i-1], order[i]) > 0 {
			return nil
		}
	}
	return append(bounds, len(order))
}

// mergeRuns merges the sorted runs of order (bounds as runBounds gives
// them, records in increasing src order) into sort-key order, stably: of
// equal rows, the one of the earlier record comes first, as in
// sortedOrder's sort. Adjacent runs merge pairwise, round after round.
func mergeRuns(c *sortKeyCmp, order []rowRef, bounds []int) []rowRef {
	buf := make([]rowRef, len(order))
	for len(bounds) > 2 {
		next := append(make([]int, 0, len(bounds)/2+2), 0)
		for k := 0; k+1 < len(bounds); k += 2 {
			lo, mid := bounds[k], bounds[k+1]
			hi := mid
			if k+2 < len(bounds) {
				hi = bounds[k+2]
			}
			mergeTwo(c, buf[lo:hi], order[lo:mid], order[mid:hi])
			next = append(next, hi)
		}
		order, buf = buf, order
		bounds = next
	}
	return order
}

// mergeTwo merges sorted a and b into dst (len(a)+len(b)), a's row first
// of equal ones.
func mergeTwo(c *sortKeyCmp, dst, a, b []rowRef) {
	i, j, k := 0, 0, 0
	for i < len(a) && j < len(b) {
		if c.compare(b[j], a[i]) < 0 {
			dst[k] = b[j]
			j++
		} else {
			dst[k] = a[i]
			i++
		}
		k++
	}
	k += copy(dst[k:], a[i:])
	copy(dst[k:], b[j:])
}

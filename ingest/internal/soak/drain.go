package main

// drainState tells from successive scrapes when the processor has caught
// up after the load: no lag in two scrapes in a row while it holds every
// partition it has held. A lag of 0 alone is not enough: a processor
// reports the lag of the partitions it holds only, and one starved of CPU
// can miss a lease renewal and hold none for a while (seen in a soak on a
// loaded machine: lag 0 in the middle of the load).
type drainState struct {
	maxParts int64
	clean    int
}

// observe takes one scrape and reports whether the processor has caught
// up.
func (d *drainState) observe(m Scrape) bool {
	d.maxParts = max(d.maxParts, m.Partitions)
	if m.Partitions > 0 && m.Partitions >= d.maxParts && m.LagMessages == 0 {
		d.clean++
	} else {
		d.clean = 0
	}
	return d.clean >= 2
}

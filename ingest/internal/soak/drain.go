package main

// drainState tells from successive scrapes when the processor has caught
// up after the load: in two scrapes in a row it holds every partition it
// has held, reports no lag (neither batches nor seconds), and has
// committed at least the events accepted. The lag gauges alone are not
// enough: a processor reports the lag of the partitions it holds only,
// and one starved of CPU can miss a lease renewal and hold none for a
// while; and each gauge counts the partitions whose backlog the log told
// within the scrape's timeout, so a log slow to answer reads as no lag
// (both seen in soaks on a loaded machine: lag 0 in the middle of the
// load).
type drainState struct {
	maxParts int64
	clean    int
}

// observe takes one scrape, with the events accepted by then, and reports
// whether the processor has caught up.
func (d *drainState) observe(m Scrape, accepted int64) bool {
	d.maxParts = max(d.maxParts, m.Partitions)
	if m.Partitions > 0 && m.Partitions >= d.maxParts && m.LagMessages == 0 && m.LagSeconds == 0 && m.Committed >= accepted {
		d.clean++
	} else {
		d.clean = 0
	}
	return d.clean >= 2
}

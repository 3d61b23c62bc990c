package api

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/mfhq/mf/rollups"
)

// lazyDays is the partitions of a day-partitioned table in a snapshot,
// read a group at a time (docs/rollups.md, "Manifest"): the root of the
// manifest gives each group's range and count, so a partition's ordinal
// (its place among all of the table's partitions, as dayParts numbers
// them) is known without reading the other groups, and a group's
// partitions are read the first time a request's window meets it. A
// snapshot's first request then reads the groups of its period, not the
// history. Shared by every request on the snapshot.
type lazyDays struct {
	snap   *rollups.Snapshot
	table  string
	groups []rollups.PartitionGroup
	base   []int // ordinal of each group's first partition
	total  int

	mu    sync.Mutex
	names [][]string // per group: its partitions, nil until read
	sigs  [][]string // their files' signatures (fileSig)
}

func newLazyDays(sn *rollups.Snapshot, table string) *lazyDays {
	l := &lazyDays{snap: sn, table: table, groups: sn.Groups(table)}
	l.base = make([]int, len(l.groups))
	for i, g := range l.groups {
		l.base[i] = l.total
		l.total += g.Partitions
	}
	l.names, l.sigs = make([][]string, len(l.groups)), make([][]string, len(l.groups))
	return l
}

// read makes sure groups [i, j) are read: the missing ones with one
// request for their span (the reader fetches only the sub-manifests it
// does not hold).
func (l *lazyDays) read(ctx context.Context, i, j int) error {
	l.mu.Lock()
	lo, hi := j, i
	for k := i; k < j; k++ {
		if l.names[k] == nil {
			lo, hi = min(lo, k), max(hi, k+1)
		}
	}
	l.mu.Unlock()
	if lo >= hi {
		return nil
	}
	ps, err := l.snap.Partitions(ctx, l.table, l.groups[lo].From, l.groups[hi-1].To)
	if err != nil {
		return err
	}
	names, sigs := make([][]string, hi-lo), make([][]string, hi-lo)
	k := lo
	for _, p := range ps {
		for k < hi && p.Name > l.groups[k].To {
			k++
		}
		if k == hi || p.Name < l.groups[k].From {
			continue
		}
		names[k-lo] = append(names[k-lo], p.Name)
		sigs[k-lo] = append(sigs[k-lo], fileSig(p.Files))
	}
	for k := lo; k < hi; k++ {
		if n := len(names[k-lo]); n != l.groups[k].Partitions {
			return fmt.Errorf("group %s of table %s has %d partitions, its root says %d", l.groups[k].ID, l.table, n, l.groups[k].Partitions)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := lo; k < hi; k++ {
		if l.names[k] == nil {
			l.names[k], l.sigs[k] = names[k-lo], sigs[k-lo]
		}
	}
	return nil
}

// between returns the ordinals [a, b) of the partitions in [first, last]
// (names, inclusive), reading the groups that hold them.
func (l *lazyDays) between(ctx context.Context, first, last string) (int, int, error) {
	i := sort.Search(len(l.groups), func(k int) bool { return l.groups[k].To >= first })
	j := sort.Search(len(l.groups), func(k int) bool { return l.groups[k].From > last })
	if i >= j {
		if i < len(l.groups) {
			return l.base[i], l.base[i], nil
		}
		return l.total, l.total, nil
	}
	if err := l.read(ctx, i, j); err != nil {
		return 0, 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.base[i] + sort.SearchStrings(l.names[i], first)
	names := l.names[j-1]
	n := sort.SearchStrings(names, last)
	if n < len(names) && names[n] == last {
		n++
	}
	return a, max(a, l.base[j-1]+n), nil
}

// at returns the name and signature of partition ord, reading its group.
func (l *lazyDays) at(ctx context.Context, ord int) (string, string, error) {
	k := sort.Search(len(l.groups), func(k int) bool { return l.base[k]+l.groups[k].Partitions > ord })
	if ord < 0 || k == len(l.groups) {
		return "", "", fmt.Errorf("table %s has no partition %d of %d", l.table, ord, l.total)
	}
	if err := l.read(ctx, k, k+1); err != nil {
		return "", "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.names[k][ord-l.base[k]], l.sigs[k][ord-l.base[k]], nil
}

// count returns the number of partitions.
func (p *dayParts) count() int {
	if p.lazy != nil {
		return p.lazy.total
	}
	return len(p.names)
}

// at returns the name and signature of partition ord.
func (p *dayParts) at(ctx context.Context, ord int) (string, string, error) {
	if p.lazy != nil {
		return p.lazy.at(ctx, ord)
	}
	return p.names[ord], p.sigs[ord], nil
}

// named returns the name and signature of the partition named day, false
// when there is none.
func (p *dayParts) named(ctx context.Context, day string) (string, string, bool, error) {
	if p.count() == 0 {
		return "", "", false, nil
	}
	var a, b int
	if p.lazy != nil {
		var err error
		if a, b, err = p.lazy.between(ctx, day, day); err != nil {
			return "", "", false, err
		}
	} else {
		a = sort.SearchStrings(p.names, day)
		b = a
		if a < len(p.names) && p.names[a] == day {
			b = a + 1
		}
	}
	if b <= a {
		return "", "", false, nil
	}
	name, sig, err := p.at(ctx, a)
	return name, sig, err == nil && name == day, err
}

// span returns the names of partitions [a, b).
func (p *dayParts) span(ctx context.Context, a, b int) ([]string, error) {
	if p.lazy == nil {
		return p.names[a:b], nil
	}
	out := make([]string, 0, b-a)
	for ord := a; ord < b; ord++ {
		name, _, err := p.lazy.at(ctx, ord)
		if err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, nil
}

// within returns the names of the partitions in [first, last] (inclusive).
func (p *dayParts) within(ctx context.Context, first, last string) ([]string, error) {
	if p.lazy == nil {
		a := sort.SearchStrings(p.names, first)
		b := sort.SearchStrings(p.names, last)
		if b < len(p.names) && p.names[b] == last {
			b++
		}
		return p.names[a:max(a, b)], nil
	}
	a, b, err := p.lazy.between(ctx, first, last)
	if err != nil {
		return nil, err
	}
	return p.span(ctx, a, b)
}

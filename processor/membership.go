package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow/go/v17/arrow/array"

	"github.com/mfhq/mf/processor/internal/facts"
	"github.com/mfhq/mf/rollups"
	"github.com/mfhq/mf/rollups/tables"
)

// Unit is who a segment lookup is about: a browser (AnonymousID) or a
// signed-in person (UserID). Exactly one is set.
type Unit struct {
	AnonymousID string
	UserID      string
}

// Membership answers a segment lookup.
type Membership struct {
	// In lists the refs of the saved segments the unit is in, sorted. A
	// browser that signed in answers with its person's membership.
	In []string
	// Built maps the ref of every built segment of the project to when its
	// membership was last built; a segment missing from it has never been
	// built (answer it as unavailable).
	Built map[string]time.Time
	// RefreshedAt is when the oldest built segment was last built; zero
	// when none was.
	RefreshedAt time.Time
}

// SegmentsConfig configures Segments.
type SegmentsConfig struct {
	// MaxAge is how old a project's membership may get before a lookup
	// looks for a newer commit in the store. A processor in the same
	// process keeps it current at once.
	MaxAge time.Duration
	// Clock is the clock MaxAge is measured on; nil: the wall clock.
	Clock func() time.Time
}

// DefaultSegmentsConfig returns a MaxAge of one second.
func DefaultSegmentsConfig() SegmentsConfig { return SegmentsConfig{MaxAge: time.Second} }

// Validate reports what in c is unusable.
func (c SegmentsConfig) Validate() error {
	if c.MaxAge < 0 {
		return fmt.Errorf("segments config: MaxAge %v must not be negative", c.MaxAge)
	}
	return nil
}

// Segments answers saved-segment membership lookups (for the flag
// service) from the identities, segment_members and segments tables,
// read through a rollups Reader, partition by partition as they change. A
// Processor given it in its Deps updates it with every commit. Safe for
// concurrent use.
type Segments struct {
	reader *rollups.Reader
	cfg    SegmentsConfig
	logger *slog.Logger

	mu    sync.Mutex
	views map[string]*segView
}

// segView is the membership of one project at one manifest version.
type segView struct {
	mu      sync.RWMutex
	version int64
	checked time.Time
	// files records the data files each partition was read from.
	files    map[string][]string
	persons  [facts.Buckets]map[facts.Ref]facts.Ref // unit -> person
	members  [facts.Buckets]map[facts.Ref][]string  // person -> segment refs
	built    map[string]time.Time
	loadLock sync.Mutex
}

// NewSegments returns a Segments over reader. logger may be nil.
func NewSegments(reader *rollups.Reader, cfg SegmentsConfig, logger *slog.Logger) (*Segments, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reader == nil {
		return nil, errors.New("cannot create segment lookups: no rollups Reader")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg.Clock = clockOr(cfg.Clock)
	return &Segments{reader: reader, cfg: cfg, logger: logger, views: map[string]*segView{}}, nil
}

// clock is the segments' clock (SegmentsConfig.Clock).
func (s *Segments) clock() time.Time { return s.cfg.Clock() }

func newSegView() *segView {
	v := &segView{files: map[string][]string{}, built: map[string]time.Time{}}
	for i := range facts.Buckets {
		v.persons[i] = map[facts.Ref]facts.Ref{}
		v.members[i] = map[facts.Ref][]string{}
	}
	return v
}

func (s *Segments) view(project string) *segView {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.views[project]
	if v == nil {
		v = newSegView()
		s.views[project] = v
	}
	return v
}

// Lookup returns the segments a unit of project is in.
func (s *Segments) Lookup(ctx context.Context, project string, u Unit) (Membership, error) {
	var ref facts.Ref
	switch {
	case u.AnonymousID != "" && u.UserID == "":
		ref = facts.NodeRef(project, facts.KindBrowser, u.AnonymousID)
	case u.UserID != "" && u.AnonymousID == "":
		ref = facts.NodeRef(project, facts.KindUser, u.UserID)
	default:
		return Membership{}, errors.New("cannot look segments up: give exactly one of AnonymousID and UserID")
	}
	v := s.view(project)
	if err := s.refresh(ctx, project, v); err != nil {
		return Membership{}, err
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	var m Membership
	m.Built = make(map[string]time.Time, len(v.built))
	for k, t := range v.built {
		m.Built[k] = t
		if m.RefreshedAt.IsZero() || t.Before(m.RefreshedAt) {
			m.RefreshedAt = t
		}
	}
	person := ref
	if p, ok := v.persons[facts.Bucket(ref)][ref]; ok {
		person = p
	}
	m.In = slices.Clone(v.members[facts.Bucket(person)][person])
	return m, nil
}

// refresh brings a view up to the latest manifest when it is older than
// MaxAge, reading only the partitions whose files changed.
func (s *Segments) refresh(ctx context.Context, project string, v *segView) error {
	v.mu.RLock()
	fresh := s.clock().Sub(v.checked) < s.cfg.MaxAge
	v.mu.RUnlock()
	if fresh {
		return nil
	}
	v.loadLock.Lock()
	defer v.loadLock.Unlock()
	sn, err := s.reader.Snapshot(ctx, project)
	if err != nil {
		return fmt.Errorf("cannot look segments up in project %q: %w", project, err)
	}
	m := sn.Manifest()
	v.mu.RLock()
	// Never go back to an older version than the one applied.
	same := m.Version <= v.version
	v.mu.RUnlock()
	if same {
		v.mu.Lock()
		v.checked = s.clock()
		v.mu.Unlock()
		return nil
	}
	type load struct {
		table, part string
		files       []string
	}
	var loads []load
	v.mu.RLock()
	for _, table := range []string{TableIdentities, TableMembers} {
		for b := range facts.Buckets {
			part := tables.BucketName(b)
			names := fileNames(m.Files(table, part))
			if !slices.Equal(names, v.files[table+"/"+part]) {
				loads = append(loads, load{table, part, names})
			}
		}
	}
	segNames := fileNames(m.Files(TableSegments, segmentsPartition))
	if !slices.Equal(segNames, v.files[TableSegments]) {
		loads = append(loads, load{TableSegments, segmentsPartition, segNames})
	}
	v.mu.RUnlock()
	// Read the changed partitions, then swap them in together.
	persons := map[int]map[facts.Ref]facts.Ref{}
	members := map[int]map[facts.Ref][]string{}
	var built map[string]time.Time
	for _, l := range loads {
		b := int(l.part[1] - '0')
		if l.part[1] >= 'a' {
			b = int(l.part[1]-'a') + 10
		}
		switch l.table {
		case TableIdentities:
			mp := map[facts.Ref]facts.Ref{}
			err = sn.Scan(ctx, TableIdentities, rollups.ScanOptions{Partitions: []string{l.part}, Columns: []string{tables.ColUnit, tables.ColPerson}},
				func(bt rollups.Batch) error {
					unit, person := bt.Record.Column(0), bt.Record.Column(1)
					for i := range int(bt.Record.NumRows()) {
						u, p := uuidAt(unit, i), uuidAt(person, i)
						if u != p {
							mp[u] = p
						}
					}
					return nil
				})
			persons[b] = mp
		case TableMembers:
			mp := map[facts.Ref][]string{}
			err = sn.Scan(ctx, TableMembers, rollups.ScanOptions{Partitions: []string{l.part}, Columns: []string{tables.ColSegment, tables.ColPerson}},
				func(bt rollups.Batch) error {
					seg, person := bt.Record.Column(0), bt.Record.Column(1)
					for i := range int(bt.Record.NumRows()) {
						p := uuidAt(person, i)
						mp[p] = append(mp[p], strAt(seg, i))
					}
					return nil
				})
			for _, refs := range mp {
				slices.Sort(refs)
			}
			members[b] = mp
		case TableSegments:
			built = map[string]time.Time{}
			err = sn.Scan(ctx, TableSegments, rollups.ScanOptions{Columns: []string{tables.ColSegment, tables.ColBuiltAt}},
				func(bt rollups.Batch) error {
					seg, at := bt.Record.Column(0), bt.Record.Column(1).(*array.Timestamp)
					for i := range int(bt.Record.NumRows()) {
						built[strAt(seg, i)] = time.UnixMilli(int64(at.Value(i)))
					}
					return nil
				})
		}
		if err != nil {
			return fmt.Errorf("cannot read segment membership of project %q: %w", project, err)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for b, mp := range persons {
		v.persons[b] = mp
	}
	for b, mp := range members {
		v.members[b] = mp
	}
	if built != nil {
		v.built = built
	}
	for _, l := range loads {
		key := l.table + "/" + l.part
		if l.table == TableSegments {
			key = TableSegments
		}
		v.files[key] = l.files
	}
	v.version = m.Version
	v.checked = s.clock()
	return nil
}

func fileNames(fs []rollups.DataFile) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// apply takes a commit of the processor into the view of its project, when
// the view is at the version the commit was based on (otherwise the next
// lookup reads the store).
func (s *Segments) apply(project string, m *rollups.Manifest, ch *facts.Changes) {
	s.mu.Lock()
	v := s.views[project]
	s.mu.Unlock()
	if v == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.version != m.Version-1 {
		v.checked = time.Time{}
		return
	}
	// Whole partitions replace the view's; changes are merged into it
	// (the view is at the version the commit was based on).
	for b, rows := range ch.Identities {
		mp := v.persons[b]
		if ch.WholeIdentities[b] || mp == nil {
			mp = make(map[facts.Ref]facts.Ref, len(rows))
			v.persons[b] = mp
		}
		for _, r := range rows {
			if r.Deleted || r.Unit == r.Person {
				delete(mp, r.Unit)
				continue
			}
			mp[r.Unit] = r.Person
		}
		v.files[TableIdentities+"/"+tables.BucketName(b)] = fileNames(m.Files(TableIdentities, tables.BucketName(b)))
	}
	for b, rows := range ch.Members {
		mp := v.members[b]
		if ch.WholeMembers[b] || mp == nil {
			mp = map[facts.Ref][]string{}
			v.members[b] = mp
		}
		for _, r := range rows {
			// A person's list is replaced, never changed in place:
			// Lookup hands out clones of it under the read lock.
			cur := mp[r.Person]
			if r.Deleted {
				next := slices.DeleteFunc(slices.Clone(cur), func(s string) bool { return s == r.Segment })
				if len(next) == 0 {
					delete(mp, r.Person)
				} else {
					mp[r.Person] = next
				}
				continue
			}
			if i, found := slices.BinarySearch(cur, r.Segment); !found {
				mp[r.Person] = slices.Insert(slices.Clone(cur), i, r.Segment)
			}
		}
		v.files[TableMembers+"/"+tables.BucketName(b)] = fileNames(m.Files(TableMembers, tables.BucketName(b)))
	}
	if !slices.Equal(fileNames(m.Files(TableSegments, segmentsPartition)), v.files[TableSegments]) {
		// The build times changed: the next lookup reads the segments
		// table (and nothing else, the other partitions being current).
		v.checked = time.Time{}
		return
	}
	v.version = m.Version
	v.checked = s.clock()
}

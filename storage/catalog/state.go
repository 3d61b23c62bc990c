package catalog

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"slices"
)

// parseHash reads a lower-case hex SHA-256.
func parseHash(h string) ([32]byte, bool) {
	var sum [32]byte
	n, err := hex.Decode(sum[:], []byte(h))
	return sum, err == nil && n == len(sum)
}

// model is the mutable catalog that the fold changes. A State is built from
// a frozen copy of it.
type model struct {
	orgs      map[string]*Organization
	users     map[string]*User
	apiKeys   map[string]*APIKey // by hash
	projects  map[string]*Project
	sources   map[string]*Source
	actions   map[string]*Action
	funnels   map[string]*Funnel
	segments  map[string]*Segment
	flags     map[string]map[string]*Flag     // project → key
	providers map[string]map[string]*Provider // project → name
	exposed   map[string]bool                 // key hashes of exposed secret keys

	// version is the log sequence of the last event that changed the
	// catalog; configVersion that of the last accepted provisioning change,
	// against which an apply is conditional.
	version       uint64
	configVersion uint64

	// dirty lists projects whose compiled flags must be rebuilt.
	dirty map[string]bool
}

func newModel() *model {
	return &model{
		orgs:      map[string]*Organization{},
		users:     map[string]*User{},
		apiKeys:   map[string]*APIKey{},
		projects:  map[string]*Project{},
		sources:   map[string]*Source{},
		actions:   map[string]*Action{},
		funnels:   map[string]*Funnel{},
		segments:  map[string]*Segment{},
		flags:     map[string]map[string]*Flag{},
		providers: map[string]map[string]*Provider{},
		exposed:   map[string]bool{},
		dirty:     map[string]bool{},
	}
}

func cloneMap[V any](m map[string]V) map[string]V {
	c := make(map[string]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func cloneNested[V any](m map[string]map[string]V) map[string]map[string]V {
	c := make(map[string]map[string]V, len(m))
	for k, v := range m {
		c[k] = cloneMap(v)
	}
	return c
}

// clone copies the maps; entities are shared (they are never modified, only
// replaced).
func (m *model) clone() *model {
	return &model{
		orgs:          cloneMap(m.orgs),
		users:         cloneMap(m.users),
		apiKeys:       cloneMap(m.apiKeys),
		projects:      cloneMap(m.projects),
		sources:       cloneMap(m.sources),
		actions:       cloneMap(m.actions),
		funnels:       cloneMap(m.funnels),
		segments:      cloneMap(m.segments),
		flags:         cloneNested(m.flags),
		providers:     cloneNested(m.providers),
		exposed:       cloneMap(m.exposed),
		version:       m.version,
		configVersion: m.configVersion,
		dirty:         cloneMap(m.dirty),
	}
}

func (m *model) putFlag(f *Flag) {
	byKey := m.flags[f.Project]
	if byKey == nil {
		byKey = map[string]*Flag{}
		m.flags[f.Project] = byKey
	}
	byKey[f.Key] = f
	m.dirty[f.Project] = true
}

func (m *model) putProvider(p *Provider) {
	byName := m.providers[p.Project]
	if byName == nil {
		byName = map[string]*Provider{}
		m.providers[p.Project] = byName
	}
	byName[p.Name] = p
}

// State is an immutable snapshot of the catalog. Every method is safe for
// concurrent use and never blocks; lookups are map reads.
type State struct {
	m *model

	websiteKeys  map[string]*Source   // plain website key → source
	keyHashes    map[string]*Source   // hex key hash → source (both kinds)
	keySums      map[[32]byte]*Source // raw key hash → source
	apiKeySums   map[[32]byte]*APIKey // raw token hash → API key
	orgProjects  map[string][]*Project
	userOrgs     map[string][]*Organization
	byProject    map[string]*projectIndex
	segmentByRef map[string]map[string]*Segment // project → ref

	// stale is closed when a newer State replaces this one.
	stale chan struct{}
}

// projectIndex holds one project's children, sorted.
type projectIndex struct {
	sources   []*Source
	actions   []*Action
	funnels   []*Funnel
	segments  []*Segment
	flags     []*Flag
	providers []*Provider
	compiled  *ProjectFlags
}

// newState freezes m (which the caller must not change afterwards) into a
// State, reusing the compiled flags of prev for projects that are not dirty.
// It fails only when a flag cannot be compiled, which validation prevents.
func newState(m *model, prev *State) *State {
	s := &State{
		m:            m,
		websiteKeys:  map[string]*Source{},
		keyHashes:    make(map[string]*Source, len(m.sources)),
		keySums:      make(map[[32]byte]*Source, len(m.sources)),
		apiKeySums:   make(map[[32]byte]*APIKey, len(m.apiKeys)),
		orgProjects:  map[string][]*Project{},
		userOrgs:     map[string][]*Organization{},
		byProject:    make(map[string]*projectIndex, len(m.projects)),
		segmentByRef: map[string]map[string]*Segment{},
		stale:        make(chan struct{}),
	}
	idx := func(project string) *projectIndex {
		pi := s.byProject[project]
		if pi == nil {
			pi = &projectIndex{}
			s.byProject[project] = pi
		}
		return pi
	}
	for _, p := range m.projects {
		s.orgProjects[p.Organization] = append(s.orgProjects[p.Organization], p)
		idx(p.ID)
	}
	for _, src := range m.sources {
		if src.Kind == KindWebsite && src.Key != "" {
			s.websiteKeys[src.Key] = src
		}
		s.keyHashes[src.KeyHash] = src
		if sum, ok := parseHash(src.KeyHash); ok {
			s.keySums[sum] = src
		}
		pi := idx(src.Project)
		pi.sources = append(pi.sources, src)
	}
	for _, k := range m.apiKeys {
		if sum, ok := parseHash(k.Hash); ok {
			s.apiKeySums[sum] = k
		}
	}
	for _, a := range m.actions {
		pi := idx(a.Project)
		pi.actions = append(pi.actions, a)
	}
	for _, f := range m.funnels {
		pi := idx(f.Project)
		pi.funnels = append(pi.funnels, f)
	}
	for _, seg := range m.segments {
		pi := idx(seg.Project)
		pi.segments = append(pi.segments, seg)
		refs := s.segmentByRef[seg.Project]
		if refs == nil {
			refs = map[string]*Segment{}
			s.segmentByRef[seg.Project] = refs
		}
		refs[seg.Ref] = seg
	}
	for project, byKey := range m.flags {
		pi := idx(project)
		for _, f := range byKey {
			pi.flags = append(pi.flags, f)
		}
	}
	for project, byName := range m.providers {
		pi := idx(project)
		for _, p := range byName {
			pi.providers = append(pi.providers, p)
		}
	}
	for _, u := range m.users {
		for _, id := range u.Organizations {
			if o := m.orgs[id]; o != nil {
				s.userOrgs[u.ID] = append(s.userOrgs[u.ID], o)
			}
		}
	}
	for _, ps := range s.orgProjects {
		slices.SortFunc(ps, func(a, b *Project) int { return cmpProject(a, b) })
	}
	for project, pi := range s.byProject {
		slices.SortFunc(pi.sources, func(a, b *Source) int { return cmp.Compare(a.ID, b.ID) })
		slices.SortFunc(pi.actions, func(a, b *Action) int { return cmp.Compare(a.ID, b.ID) })
		slices.SortFunc(pi.funnels, func(a, b *Funnel) int { return cmp.Compare(a.ID, b.ID) })
		slices.SortFunc(pi.segments, func(a, b *Segment) int { return cmp.Compare(a.ID, b.ID) })
		slices.SortFunc(pi.flags, func(a, b *Flag) int { return cmp.Compare(a.Key, b.Key) })
		slices.SortFunc(pi.providers, func(a, b *Provider) int { return cmp.Compare(a.Name, b.Name) })
		if prev != nil && !m.dirty[project] {
			if old := prev.byProject[project]; old != nil && old.compiled != nil {
				pi.compiled = old.compiled
				continue
			}
		}
		pi.compiled = compileProject(pi.flags, m.segments)
	}
	m.dirty = map[string]bool{}
	return s
}

// cmpProject orders projects by creation time (unknown last), then id.
func cmpProject(a, b *Project) int {
	switch {
	case a.CreatedAt != nil && b.CreatedAt != nil:
		if c := a.CreatedAt.Compare(*b.CreatedAt); c != 0 {
			return c
		}
	case a.CreatedAt != nil:
		return -1
	case b.CreatedAt != nil:
		return 1
	}
	return cmp.Compare(a.ID, b.ID)
}

// Version is the log sequence of the last event that changed the catalog
// (0 for an empty catalog). It only grows; use it for caches and ETags.
func (s *State) Version() uint64 { return s.m.version }

// Stale returns a channel that is closed when a newer State replaces this
// one (Catalog.State then returns it).
func (s *State) Stale() <-chan struct{} { return s.stale }

// SourceByKey finds the source of a website key or a secret key. A website
// key is found by its plain text; any other key by its SHA-256 hash.
func (s *State) SourceByKey(key string) (*Source, bool) {
	if src, ok := s.websiteKeys[key]; ok {
		return src, true
	}
	src, ok := s.keySums[sha256.Sum256([]byte(key))]
	return src, ok
}

// SourceByKeyHash finds a source by the SHA-256 hash of its key (HashToken).
func (s *State) SourceByKeyHash(hash string) (*Source, bool) {
	src, ok := s.keyHashes[hash]
	return src, ok
}

// SecretKeyExposed reports whether the current secret key of a server
// source has been marked exposed (Catalog.MarkSecretKeyExposed).
func (s *State) SecretKeyExposed(sourceID string) bool {
	src := s.m.sources[sourceID]
	return src != nil && s.m.exposed[src.KeyHash]
}

// APIKey finds an API key by its token, with its owner.
func (s *State) APIKey(token string) (*APIKey, *User, bool) {
	k := s.apiKeySums[sha256.Sum256([]byte(token))]
	if k == nil {
		return nil, nil, false
	}
	u := s.m.users[k.User]
	return k, u, u != nil
}

// Organization finds an organization by id.
func (s *State) Organization(id string) (*Organization, bool) {
	o, ok := s.m.orgs[id]
	return o, ok
}

// User finds a user by id.
func (s *State) User(id string) (*User, bool) {
	u, ok := s.m.users[id]
	return u, ok
}

// UserOrganizations lists the organizations a user belongs to, in the
// user's order.
func (s *State) UserOrganizations(userID string) []*Organization { return s.userOrgs[userID] }

// Project finds a project by id.
func (s *State) Project(id string) (*Project, bool) {
	p, ok := s.m.projects[id]
	return p, ok
}

// Projects lists an organization's projects, oldest first (unknown creation
// time last, then by id).
func (s *State) Projects(orgID string) []*Project { return s.orgProjects[orgID] }

// Organizations lists every organization by id.
func (s *State) Organizations() []*Organization {
	out := make([]*Organization, 0, len(s.m.orgs))
	for _, o := range s.m.orgs {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *Organization) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Source finds a source by id.
func (s *State) Source(id string) (*Source, bool) {
	src, ok := s.m.sources[id]
	return src, ok
}

// Action finds an action by id.
func (s *State) Action(id string) (*Action, bool) {
	a, ok := s.m.actions[id]
	return a, ok
}

// Funnel finds a funnel by id.
func (s *State) Funnel(id string) (*Funnel, bool) {
	f, ok := s.m.funnels[id]
	return f, ok
}

// Segment finds a segment by id.
func (s *State) Segment(id string) (*Segment, bool) {
	seg, ok := s.m.segments[id]
	return seg, ok
}

// SegmentByRef finds a project's segment by its opaque ref.
func (s *State) SegmentByRef(projectID, ref string) (*Segment, bool) {
	seg, ok := s.segmentByRef[projectID][ref]
	return seg, ok
}

// Flag finds a project's flag by key.
func (s *State) Flag(projectID, key string) (*Flag, bool) {
	f, ok := s.m.flags[projectID][key]
	return f, ok
}

func (s *State) index(projectID string) *projectIndex {
	if pi := s.byProject[projectID]; pi != nil {
		return pi
	}
	return &projectIndex{compiled: &ProjectFlags{}}
}

// Sources lists a project's sources by id.
func (s *State) Sources(projectID string) []*Source { return s.index(projectID).sources }

// Actions lists a project's actions by id.
func (s *State) Actions(projectID string) []*Action { return s.index(projectID).actions }

// Funnels lists a project's funnels by id.
func (s *State) Funnels(projectID string) []*Funnel { return s.index(projectID).funnels }

// Segments lists a project's segments by id.
func (s *State) Segments(projectID string) []*Segment { return s.index(projectID).segments }

// Flags lists a project's flags by key.
func (s *State) Flags(projectID string) []*Flag { return s.index(projectID).flags }

// Providers lists a project's providers by name.
func (s *State) Providers(projectID string) []*Provider { return s.index(projectID).providers }

// CompiledFlags returns a project's flags compiled for flag documents
// (never nil; empty for an unknown project).
func (s *State) CompiledFlags(projectID string) *ProjectFlags { return s.index(projectID).compiled }

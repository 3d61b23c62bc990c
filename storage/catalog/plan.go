package catalog

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Plan is a provisioning file merged into a State: the changes that applying
// it appends to the log, and the State they lead to. A Plan with no changes
// means the file is already applied.
type Plan struct {
	base    uint64
	changes []change
	next    *State
}

// Len is the number of changes (entities created or updated).
func (p *Plan) Len() int { return len(p.changes) }

// Describe lists the changes, one line each, such as
// "flag.put 9a8b7c6d-…/new-checkout". Secret values never appear.
func (p *Plan) Describe() []string {
	out := make([]string, len(p.changes))
	for i, c := range p.changes {
		out[i] = c.typ + " " + c.describe()
	}
	return out
}

// State is the catalog as it will be once the plan is applied (with the
// version of the State it was planned on).
func (p *Plan) State() *State { return p.next }

// Plan merges a parsed provisioning file into the state: an upsert by id
// (flags by project and key, API keys by token, providers by project and
// name); entities the file does not name stay. Flags without a seed keep
// their stored seed or get a new one; new segments get a new ref. The
// merged result is checked against every rule across entities and the size
// caps of flag documents; a refusal is a *ValidationError.
func (s *State) Plan(f *File) (*Plan, error) {
	return s.plan(f, nil)
}

type planner struct {
	f       *File
	m       *model
	fs      *faults
	changes []change
	// refs holds the segment refs in use, "project/ref".
	refs map[string]bool
}

func (s *State) plan(f *File, check func(*State) error) (*Plan, error) {
	pl := &planner{f: f, m: s.m.clone(), fs: &faults{}}
	pl.merge()
	if err := pl.fs.err(); err != nil {
		return nil, err
	}
	pl.crossCheck()
	if err := pl.fs.err(); err != nil {
		return nil, err
	}
	dirty := cloneMap(pl.m.dirty)
	next := newState(pl.m, s)
	pl.checkSizes(next, dirty)
	if err := pl.fs.err(); err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(next); err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				return nil, ve
			}
			pl.fs.add("", "flag documents cannot be compiled: %v", err)
			return nil, pl.fs.err()
		}
	}
	return &Plan{base: s.m.configVersion, changes: pl.changes, next: next}, nil
}

// put records a change when the entity is new or differs from the stored
// one, and applies it to the candidate model.
func (pl *planner) put(typ string, old, v any) {
	if old != nil && sameJSON(old, v) {
		return
	}
	c := change{typ: typ, value: v}
	pl.changes = append(pl.changes, c)
	pl.m.apply(c)
}

// moved reports an entity that would change its parent.
func (pl *planner) moved(path, what, parentKind, oldParent string) {
	pl.fs.add(path, "%s belongs to %s %s in the catalog; an entity cannot move to another %s", what, parentKind, oldParent, parentKind)
}

func (pl *planner) merge() {
	f, m := pl.f, pl.m
	for _, o := range f.Organizations {
		pl.put(typeOrganization, nilIfAbsent(m.orgs[o.ID]), o)
	}
	for _, p := range f.Projects {
		old := m.projects[p.ID]
		if old != nil && old.Organization != p.Organization {
			pl.moved(pathField(f.paths[refProject(p.ID)], "id"), "project", "organization", old.Organization)
			continue
		}
		pl.put(typeProject, nilIfAbsent(old), p)
	}
	for _, u := range f.Users {
		pl.put(typeUser, nilIfAbsent(m.users[u.ID]), u)
	}
	for _, k := range f.APIKeys {
		old := m.apiKeys[k.Hash]
		if old != nil && old.User != k.User {
			pl.fs.add(pathField(f.paths[refAPIKey(k.Hash)], "token"), "API key belongs to another user in the catalog; a key cannot move to another user")
			continue
		}
		pl.put(typeAPIKey, nilIfAbsent(old), k)
	}
	for _, src := range f.Sources {
		old := m.sources[src.ID]
		if old != nil && old.Project != src.Project {
			pl.moved(pathField(f.paths[refSource(src.ID)], "id"), "source", "project", old.Project)
			continue
		}
		pl.put(typeSource, nilIfAbsent(old), src)
	}
	for _, a := range f.Actions {
		old := m.actions[a.ID]
		if old != nil && old.Project != a.Project {
			pl.moved(pathField(f.paths[refAction(a.ID)], "id"), "action", "project", old.Project)
			continue
		}
		pl.put(typeAction, nilIfAbsent(old), a)
	}
	for _, fu := range f.Funnels {
		old := m.funnels[fu.ID]
		if old != nil && old.Project != fu.Project {
			pl.moved(pathField(f.paths[refFunnel(fu.ID)], "id"), "funnel", "project", old.Project)
			continue
		}
		pl.put(typeFunnel, nilIfAbsent(old), fu)
	}
	for _, seg := range f.Segments {
		old := m.segments[seg.ID]
		if old != nil && old.Project != seg.Project {
			pl.moved(pathField(f.paths[refSegment(seg.ID)], "id"), "segment", "project", old.Project)
			continue
		}
		c := *seg
		if old != nil {
			c.Ref = old.Ref
		} else {
			c.Ref = pl.newRef(seg.Project)
		}
		pl.put(typeSegment, nilIfAbsent(old), &c)
	}
	for _, fl := range f.Flags {
		old := m.flags[fl.Project][fl.Key]
		c := *fl
		if c.Seed == "" {
			if old != nil {
				c.Seed = old.Seed
			} else {
				c.Seed = randomToken(12)
			}
		}
		pl.put(typeFlag, nilIfAbsent(old), &c)
	}
	for _, p := range f.Providers {
		pl.put(typeProvider, nilIfAbsent(m.providers[p.Project][p.Name]), p)
	}
}

// nilIfAbsent turns a typed nil pointer into a nil interface.
func nilIfAbsent[T any](p *T) any {
	if p == nil {
		return nil
	}
	return p
}

// newRef returns a segment ref not used in the project.
func (pl *planner) newRef(project string) string {
	if pl.refs == nil {
		pl.refs = map[string]bool{}
		for _, seg := range pl.m.segments {
			pl.refs[seg.Project+"/"+seg.Ref] = true
		}
	}
	for {
		ref := randomToken(8)
		if !pl.refs[project+"/"+ref] {
			pl.refs[project+"/"+ref] = true
			return ref
		}
	}
}

// randomToken returns n random characters [a-z0-9] from crypto/rand.
func randomToken(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		_, _ = rand.Read(buf) // never fails (crypto/rand, Go 1.24+)
		for _, b := range buf {
			// 252 = 7 * 36: take bytes below it for a uniform choice.
			if b < 252 && len(out) < n {
				out = append(out, alphabet[b%36])
			}
		}
	}
	return string(out)
}

// sameJSON reports whether two entities encode the same on the log.
func sameJSON(a, b any) bool {
	ea, err1 := encodeValue(a)
	eb, err2 := encodeValue(b)
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}

// encodeValue encodes an entity as on the log (no HTML escaping).
func encodeValue(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Paths of entities: the file's path when the file names the entity, else a
// path by id.

func (pl *planner) orgPath(id string) string {
	if p, ok := pl.f.paths[refOrg(id)]; ok {
		return p
	}
	return pathID("", "organizations", id)
}

func (pl *planner) userPath(id string) string {
	if p, ok := pl.f.paths[refUser(id)]; ok {
		return p
	}
	return pathID("", "users", id)
}

func (pl *planner) projectPath(id string) string {
	if p, ok := pl.f.paths[refProject(id)]; ok {
		return p
	}
	org := ""
	if pr := pl.m.projects[id]; pr != nil {
		org = pr.Organization
	}
	return pathID(pl.orgPath(org), "projects", id)
}

func (pl *planner) childPath(ref, project, kind, id string) string {
	if p, ok := pl.f.paths[ref]; ok {
		return p
	}
	return pathID(pl.projectPath(project), kind, id)
}

func (pl *planner) sourcePath(s *Source) string {
	return pl.childPath(refSource(s.ID), s.Project, "sources", s.ID)
}

func (pl *planner) actionPath(a *Action) string {
	return pl.childPath(refAction(a.ID), a.Project, "actions", a.ID)
}

func (pl *planner) funnelPath(f *Funnel) string {
	return pl.childPath(refFunnel(f.ID), f.Project, "funnels", f.ID)
}

func (pl *planner) segmentPath(s *Segment) string {
	return pl.childPath(refSegment(s.ID), s.Project, "segments", s.ID)
}

func (pl *planner) flagPath(f *Flag) string {
	if p, ok := pl.f.paths[refFlag(f.Project, f.Key)]; ok {
		return p
	}
	return fmt.Sprintf("%s.flags[key=%s]", pl.projectPath(f.Project), f.Key)
}

// ordered lists entities for the checks: those only in the catalog first
// (by id), then those the file names, in file order, so that a fault about
// a pair lands on the entity of the file.
func ordered[T any](all map[string]*T, file []*T, key func(*T) string) []*T {
	inFile := make(map[string]bool, len(file))
	for _, e := range file {
		inFile[key(e)] = true
	}
	out := make([]*T, 0, len(all))
	for k, e := range all {
		if !inFile[k] {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *T) int { return cmp.Compare(key(a), key(b)) })
	for _, e := range file {
		if cur, ok := all[key(e)]; ok {
			out = append(out, cur)
		}
	}
	return out
}

func (pl *planner) allFlags() map[string]*Flag {
	all := map[string]*Flag{}
	for _, byKey := range pl.m.flags {
		for _, f := range byKey {
			all[f.Project+"/"+f.Key] = f
		}
	}
	return all
}

// crossCheck applies the rules that relate entities to each other, on the
// merged candidate.
func (pl *planner) crossCheck() {
	m, f, fs := pl.m, pl.f, pl.fs

	for _, u := range ordered(m.users, f.Users, func(u *User) string { return u.ID }) {
		for i, org := range u.Organizations {
			if m.orgs[org] == nil {
				fs.add(pathIndex(pathField(pl.userPath(u.ID), "organizations"), i), "organization %s does not exist", org)
			}
		}
	}

	orgSlugs := map[string]string{}
	for _, o := range ordered(m.orgs, f.Organizations, func(o *Organization) string { return o.ID }) {
		path := pl.orgPath(o.ID)
		if prev, dup := orgSlugs[o.Slug]; dup {
			fs.add(pathField(path, "slug"), "slug %q is already used by %s", o.Slug, prev)
			continue
		}
		orgSlugs[o.Slug] = path
	}

	projects := ordered(m.projects, f.Projects, func(p *Project) string { return p.ID })
	projectSlugs := map[string]string{}
	for _, p := range projects {
		path := pl.projectPath(p.ID)
		k := p.Organization + "/" + p.Slug
		if prev, dup := projectSlugs[k]; dup {
			fs.add(pathField(path, "slug"), "slug %q is already used in this organization by %s", p.Slug, prev)
			continue
		}
		projectSlugs[k] = path
	}

	keys := map[string]string{}
	for _, s := range ordered(m.sources, f.Sources, func(s *Source) string { return s.ID }) {
		path := pl.sourcePath(s)
		if prev, dup := keys[s.KeyHash]; dup {
			fs.add(pathField(path, "key"), "key is already used by %s", prev)
			continue
		}
		keys[s.KeyHash] = path
	}

	purchase := map[string]string{}
	for _, a := range ordered(m.actions, f.Actions, func(a *Action) string { return a.ID }) {
		if a.Role != RolePurchase {
			continue
		}
		path := pl.actionPath(a)
		if prev, dup := purchase[a.Project]; dup {
			fs.add(pathField(path, "role"), "a project has at most one purchase action, and %s is one", prev)
			continue
		}
		purchase[a.Project] = path
	}

	for _, fu := range ordered(m.funnels, f.Funnels, func(f *Funnel) string { return f.ID }) {
		base := pathField(pl.funnelPath(fu), "steps")
		for i, step := range fu.Steps {
			pl.checkAction(pathIndex(base, i), fu.Project, step, false)
		}
	}

	flagFile := make([]*Flag, len(f.Flags))
	for i, fl := range f.Flags {
		flagFile[i] = &Flag{Project: fl.Project, Key: fl.Key}
	}
	for _, fl := range ordered(pl.allFlags(), flagFile, func(f *Flag) string { return f.Project + "/" + f.Key }) {
		base := pathField(pl.flagPath(fl), "r")
		for i, r := range fl.Rules {
			for j, c := range r.If {
				if c.Kind != CondSegment {
					continue
				}
				at := pathIndex(pathField(pathIndex(base, i), "if"), j)
				pl.checkSegment(pathIndex(at, 1), fl.Project, c.Segment)
			}
		}
	}

	segments := ordered(m.segments, f.Segments, func(s *Segment) string { return s.ID })
	for _, seg := range segments {
		base := pathField(pl.segmentPath(seg), "filters")
		for i, flt := range seg.Filters {
			at := pathField(pathIndex(base, i), "value")
			switch filterSpecs[flt.Field].value {
			case valueGoal:
				pl.checkAction(at, seg.Project, flt.Value, true)
			case valueAction:
				pl.checkAction(at, seg.Project, flt.Value, false)
			case valueSegment:
				if flt.Value == seg.ID {
					fs.add(at, "a segment cannot refer to itself")
				} else if pl.checkSegment(at, seg.Project, flt.Value) && pl.reaches(flt.Value, seg.ID) {
					fs.add(at, "segment %s refers back to this segment: segments cannot refer to each other in a cycle", flt.Value)
				}
			case valueFunnel:
				ff, _ := parseFunnelFilter(flt.Value)
				for _, a := range ff.actions {
					pl.checkAction(at, seg.Project, a, false)
				}
			case valueExperiment:
				ef, _ := parseExperimentFilter(flt.Value)
				if m.flags[seg.Project][ef.key] == nil {
					fs.add(at, "experiment %q is not a flag of this project", ef.key)
				}
			}
		}
	}
}

// checkAction checks that id names an action (a goal when goal is set) of
// the project.
func (pl *planner) checkAction(path, project, id string, goal bool) {
	a := pl.m.actions[id]
	switch {
	case a == nil:
		pl.fs.add(path, "action %s does not exist", id)
	case a.Project != project:
		pl.fs.add(path, "action %s belongs to another project", id)
	case goal && a.Role == "":
		pl.fs.add(path, "action %s is not a goal (it has no role)", id)
	}
}

// checkSegment checks that id names a segment of the project.
func (pl *planner) checkSegment(path, project, id string) bool {
	seg := pl.m.segments[id]
	switch {
	case seg == nil:
		pl.fs.add(path, "segment %s does not exist", id)
		return false
	case seg.Project != project:
		pl.fs.add(path, "segment %s belongs to another project", id)
		return false
	}
	return true
}

// reaches reports whether segment from refers, directly or through other
// segments, to segment to.
func (pl *planner) reaches(from, to string) bool {
	seen := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if id == to {
			return true
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		if seg := pl.m.segments[id]; seg != nil {
			for _, flt := range seg.Filters {
				if flt.Field == "segment" {
					stack = append(stack, flt.Value)
				}
			}
		}
	}
	return false
}

// checkSizes checks the size caps of the flag documents of every project
// the plan changes: the browser and server documents exactly, the values
// document by an upper bound (ProjectFlags.ValuesDocumentBound). Every
// project is checked whatever sources it has, so adding a source never makes
// a catalog invalid.
func (pl *planner) checkSizes(next *State, dirty map[string]bool) {
	ids := sortedKeys(dirty)
	slices.SortStableFunc(ids, func(a, b string) int {
		_, fa := pl.f.paths[refProject(a)]
		_, fb := pl.f.paths[refProject(b)]
		switch {
		case fa == fb:
			return 0
		case fa:
			return 1
		}
		return -1
	})
	for _, id := range ids {
		pf := next.CompiledFlags(id)
		path := pathField(pl.projectPath(id), "flags")
		if n := len(pf.AppendDocument(nil, ViewBrowser, maxAt)); n > MaxBrowserDocument {
			pl.fs.add(path, "the browser flag document (flags read by the website) would be %d bytes, over its cap of %d bytes", n, MaxBrowserDocument)
		} else if n := pf.ValuesDocumentBound(); n > MaxValuesDocument {
			pl.fs.add(path, "the values flag document (flags read by the website) could be %d bytes, over its cap of %d bytes", n, MaxValuesDocument)
		}
		if n := len(pf.AppendDocument(nil, ViewServer, maxAt)); n > MaxServerDocument {
			pl.fs.add(path, "the server flag document (flags read by servers) would be %d bytes, over its cap of %d bytes", n, MaxServerDocument)
		}
	}
}

// Validate checks a provisioning file against every rule, merged into st
// (nil for an empty catalog), without applying it: a dry run of Apply.
func Validate(data []byte, st *State) error {
	f, err := Parse(data)
	if err != nil {
		return err
	}
	if st == nil {
		st = newState(newModel(), nil)
	}
	_, err = st.Plan(f)
	return err
}

package facts

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mfhq/mf/processor/internal/channels"
	"github.com/mfhq/mf/storage/records"
)

// The engine's state as rows.
//
// What an engine keeps beyond the events of the days in memory (the
// persons' history, what is kept of cold and final days) is written as
// rows, each keyed by (Ref, Kind, Sub), so that a restart restores it
// instead of folding every stored event again: Restore rebuilds the
// nodes and the cold days from the rows, and names the days that were in
// memory, which the caller reads back from the events table with Thaw
// (their events are linked back without counting their activity, which
// the rows hold). Then Settle, as after a fold. docs/processor.md
// ("State rows") describes the format.

// StateKind tells what a state row holds.
type StateKind byte

// The state rows' kinds.
const (
	// StateNode is a part (browser or user), keyed by its ref: its kind
	// and raw id, its activity by day, the touches of its cold visits
	// and (a browser) the earliest sign-in of each user on it.
	StateNode StateKind = 'n'
	// StateSummary is what is kept of a day (Ref zero, Sub: the day):
	// cold, final or in memory.
	StateSummary StateKind = 'c'
	// StateEngine is the engine's own (Ref and Sub zero): which days are
	// final.
	StateEngine StateKind = 'e'
	// StateMembers is a person's membership (Ref: the person), the
	// segments it is in; a person in none has no row.
	StateMembers StateKind = 'm'
	// StateClaim is a browser whose claim may have moved while visits of
	// its were cold, and whose cold visits' rows were not written again
	// yet (Ref: the browser; reclaim.go): a restore has ReclaimDays take
	// it up instead of writing the checkpoint's reclaim days whole.
	StateClaim StateKind = 'w'
)

// stateVersion is the first byte of every row's data.
const stateVersion = 1

// StateRow is one row of an engine's state.
type StateRow struct {
	Ref  Ref
	Kind StateKind
	Sub  Ref
	Data []byte
}

// CompareStateKeys orders rows by key: ref, kind, sub.
func CompareStateKeys(a, b *StateRow) int {
	if c := bytesCompare16(&a.Ref, &b.Ref); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	return bytesCompare16(&a.Sub, &b.Sub)
}

// daySub is the Sub of a day's rows.
func daySub(d int32) Ref {
	var s Ref
	binary.BigEndian.PutUint32(s[:4], uint32(d)^1<<31)
	return s
}

func subDay(s Ref) int32 { return int32(binary.BigEndian.Uint32(s[:4]) ^ 1<<31) }

// The status of a day's summary.
const (
	summaryCold  = 'c'
	summaryFinal = 'f'
	summaryHot   = 'h'
)

// State returns every row of the engine's state, sorted by key. Work not
// computed yet is computed first.
func (e *Engine) State() []StateRow {
	e.compute()
	ch := &Changes{}
	e.stateChanges(ch, true)
	rows := slices.Clone(ch.StateDays)
	for _, rs := range ch.State {
		rows = append(rows, rs...)
	}
	slices.SortFunc(rows, func(a, b StateRow) int { return CompareStateKeys(&a, &b) })
	return rows
}

// hotSpans returns the days in memory that are not cold, each with the
// span of the visits that have events on it (empty: lo > hi).
func (e *Engine) hotSpans() map[int32][2]int64 {
	out := map[int32][2]int64{}
	mark := func(d int32) {
		if e.cold[d] == nil && (!e.final || d > e.finalThrough) {
			out[d] = [2]int64{math.MaxInt64, math.MinInt64}
		}
	}
	for d := range e.days {
		mark(d)
	}
	for d := range e.visitsByDay {
		mark(d)
	}
	for _, vs := range e.visitsByDay {
		for v := range vs {
			for x := e.DayOf(v.start); x <= e.DayOf(v.end); x++ {
				if s, ok := out[x]; ok {
					out[x] = [2]int64{min(s[0], v.start), max(s[1], v.end)}
				}
			}
		}
	}
	return out
}

// Restore returns an engine with the state of rows (State's, in any
// order) and the day sets of act (ActivityRows'), and the days to read
// back: see Restoring.
func Restore(cfg Config, rows []StateRow, act map[int32][]ActivityRow) (*Engine, []int32, *Thawing, error) {
	r, err := NewRestoring(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	for i := range rows {
		if err := r.Add(&rows[i]); err != nil {
			return nil, nil, nil, err
		}
	}
	for d, rows := range act {
		for _, a := range rows {
			if err := r.Activity(d, a.Kind, a.People); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	return r.Finish()
}

// Restoring rebuilds an engine from state rows (Engine.State, or the rows
// its Flushes output, merged by key), given in any order with Add.
type Restoring struct {
	e       *Engine
	clients map[string]*Client
	touches map[string]*channels.Touch
	signIns []stateSignIn
	hot     []int32
	// residents are, by cold day, the visits whose events were in memory.
	residents map[int32][]Ref
	// members: the rows hold the persons' memberships (the engine row
	// says so); lists shares equal ones.
	members bool
	lists   map[string][]string
	// v1: a part's row is of the first format (written whole again).
	v1 bool
	// claims are the browsers of the StateClaim rows; holdsClaims: the
	// engine row says the rows hold every pending claim.
	claims      []Ref
	holdsClaims bool
}

// NewRestoring starts restoring an engine with cfg.
func NewRestoring(cfg Config) (*Restoring, error) {
	e, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &Restoring{e: e, residents: map[int32][]Ref{}, clients: map[string]*Client{}, touches: map[string]*channels.Touch{},
		lists: map[string][]string{}}, nil
}

// Add restores one row; its Data is not kept.
func (rs *Restoring) Add(r *StateRow) error {
	e := rs.e
	d := stateDecoder{b: r.Data, clients: rs.clients, touches: rs.touches}
	switch r.Kind {
	case StateNode:
		if len(r.Data) > 0 && (r.Data[0] == stateVersion || r.Data[0] == nodeVersionV2) {
			rs.v1 = true
		}
		n := d.node(e, r.Ref, &rs.signIns)
		if err := d.done(r); err != nil {
			return err
		}
		if n.kind != KindBrowser && n.kind != KindUser {
			return fmt.Errorf("state row %s: node kind %q is not a browser or a user", r, n.kind)
		}
		if e.nodes[n.ref] != nil {
			return fmt.Errorf("state row %s: a second row of the node", r)
		}
		e.nodes[n.ref] = n
		if n.kind == KindUser {
			e.users[n.raw] = n
		}
		return nil
	case StateMembers:
		d.version()
		mem, ok := rs.lists[string(d.b)]
		if !ok {
			key := string(d.b)
			mem = make([]string, d.count())
			for i := range mem {
				mem[i] = d.interned(e)
			}
			rs.lists[key] = mem
		} else {
			d.b = nil
		}
		if err := d.done(r); err != nil {
			return err
		}
		if len(mem) == 0 {
			return fmt.Errorf("state row %s: a membership in no segment", r)
		}
		b := Bucket(r.Ref)
		if _, dup := e.bx.members[b][r.Ref]; dup {
			return fmt.Errorf("state row %s: a second membership of the person", r)
		}
		e.bx.members[b][r.Ref] = mem
		for _, s := range mem {
			e.segCount[s]++
		}
		return nil
	case StateSummary:
		day := subDay(r.Sub)
		d.version()
		status := d.byte()
		lo, hi := d.varint(), d.varint()
		switch status {
		case summaryCold:
			c := &coldDay{lo: lo, hi: hi, visits: int(d.uvarint()), sum: d.uint64()}
			if w := int(d.uvarint()); w > 0 && d.err == nil {
				if w > len(d.b)/8 || w&(w-1) != 0 {
					d.err = errors.New("bad Bloom filter size")
				} else {
					c.ids.bits = make([]uint64, w)
					for j := range c.ids.bits {
						c.ids.bits[j] = d.uint64()
					}
					c.ids.mask = uint64(w)*64 - 1
				}
			}
			if n := d.count(); n > 0 && n <= len(d.b)/16 {
				ids := make([]Ref, n)
				for j := range ids {
					ids[j] = d.ref()
				}
				rs.residents[day] = ids
			} else if n > 0 {
				d.fail("residents")
			}
			e.cold[day] = c
		case summaryFinal:
			e.finalSpan[day] = [2]int64{lo, hi}
		case summaryHot:
			e.cold[day] = &coldDay{lo: lo, hi: hi}
			rs.hot = append(rs.hot, day)
		default:
			d.err = fmt.Errorf("unknown day status %q", status)
		}
	case StateEngine:
		d.version()
		e.final = d.byte() == 1
		e.finalThrough = int32(d.varint())
		// Rows written before the memberships were have no flags.
		if len(d.b) > 0 {
			f := d.byte()
			rs.members = f&engineHoldsMembers != 0
			rs.holdsClaims = f&engineHoldsClaims != 0
		}
	case StateClaim:
		d.version()
		rs.claims = append(rs.claims, r.Ref)
	default:
		return fmt.Errorf("state row %s: unknown kind", r)
	}
	return d.done(r)
}

// Finish returns the engine, the days to read back (sorted) and the
// Thawing to give their events rows to (nil when none): the days that
// were in memory are read back whole, and of the cold days with residents
// only the rows of the residents' visits. Then call Settle, as after a
// fold of the events table.
func (rs *Restoring) Finish() (*Engine, []int32, *Thawing, error) {
	e := rs.e
	for _, s := range rs.signIns {
		u := e.nodes[s.user]
		if u == nil || u.kind != KindUser || s.browser.kind != KindBrowser {
			return nil, nil, nil, fmt.Errorf("state row of node %x: a sign-in of %x, which is not a user's", s.browser.ref[:], s.user[:])
		}
		s.browser.resetSignIn(u, s.at)
	}
	for _, n := range e.nodes {
		if n.kind == KindBrowser && len(n.signIns) > 0 {
			e.restoreClaim(n)
			e.dirtyIdentity[n] = true // claimed: an identities row
		}
	}
	if rs.v1 {
		// Parts of an earlier format: the next Flush writes every row in
		// the current one, which a restore keeps encoded.
		e.stateAll = true
	}
	// The day sets are those stored, unless a person has no number (rows
	// from before the numbers): then every person is computed into new
	// sets, written whole.
	e.actWhole = false
	renumber := false
	for _, n := range e.nodes {
		e.nextNum = max(e.nextNum, n.num)
		if isPerson(n) {
			n.actState = actUnknown
			renumber = renumber || n.num == 0
		}
	}
	if renumber {
		clear(e.act)
		for _, n := range e.nodes {
			n.actState = actNone
			if isPerson(n) {
				e.dirtyPersons[n] = true
			}
		}
		e.actWhole, e.stateAll = true, true
	}
	if rs.members {
		// The persons' rows are in the tables and their memberships in
		// the state rows: a person is computed when something changes
		// it, and its first row is output then (the hash of the row
		// stored is not known: unknownHash).
		for _, n := range e.nodes {
			if isPerson(n) {
				e.bx.persons[Bucket(n.ref)][n.ref] = unknownHash
			}
		}
		for b := range Buckets {
			for ref := range e.bx.members[b] {
				if n := e.nodes[ref]; n == nil || !isPerson(n) {
					return nil, nil, nil, fmt.Errorf("state row %s: the membership of a part that is not a person", &StateRow{Ref: ref, Kind: StateMembers})
				}
			}
		}
	} else {
		// Rows written before the memberships were: every person is
		// computed, as after a fold, and the next Flush writes every row.
		for _, n := range e.nodes {
			e.dirtyPersons[n] = true
		}
		e.stateAll = true
	}
	if len(rs.claims) > 0 && !rs.holdsClaims {
		return nil, nil, nil, fmt.Errorf("state row %s: a pending claim, yet the engine row does not say the rows hold them", &StateRow{Ref: rs.claims[0], Kind: StateClaim})
	}
	for _, ref := range rs.claims {
		n := e.nodes[ref]
		if n == nil || n.kind != KindBrowser {
			return nil, nil, nil, fmt.Errorf("state row %s: the pending claim of a part that is not a browser", &StateRow{Ref: ref, Kind: StateClaim})
		}
		e.open(n) // its cold touches name the days to reclaim
		e.claimWant[n] = true
		e.claimOut[ref] = true
	}
	e.claimsRestored = rs.holdsClaims
	days := slices.Clone(rs.hot)
	for d := range rs.residents {
		if e.cold[d] != nil {
			days = append(days, d)
		}
	}
	if len(days) == 0 {
		return e, nil, nil, nil
	}
	slices.Sort(days)
	days = slices.Compact(days)
	// The claims (and, from rows without memberships, every person) are
	// computed here, as Settle does: the thaw's compute would keep the
	// persons' rows for output.
	e.settling = true
	e.compute()
	e.settling = false
	th := e.Thaw(rs.hot)
	th.residents = map[Ref]bool{}
	th.residentDays = map[int32]bool{}
	for d, ids := range rs.residents {
		th.residentDays[d] = true
		for _, id := range ids {
			th.residents[id] = true
		}
	}
	return e, days, th, nil
}

// engineHoldsMembers is the engine row's flag saying that the state rows
// hold the persons' memberships (StateMembers).
const engineHoldsMembers = 1

// engineHoldsClaims is the engine row's flag saying that the state rows
// hold every pending claim (StateClaim).
const engineHoldsClaims = 2

// unknownHash is the row hash of a person restored from state rows (no
// row hashes to 0, see personState.hash): its next compute outputs its
// row.
const unknownHash = 0

// restoreClaim sets browser b's claim from its sign-ins, as reclaim
// does, marking nothing: the stored rows show it.
func (e *Engine) restoreClaim(b *node) {
	var best *node
	var bk evKey
	for u, k := range b.signIns {
		if best == nil || k.cmp(bk) < 0 || (k.cmp(bk) == 0 && slices.Compare(u.ref[:], best.ref[:]) < 0) {
			best, bk = u, k
		}
	}
	b.claimer, b.claimAt = best, bk.t
	if best.claimed == nil {
		best.claimed = map[*node]struct{}{}
	}
	best.claimed[b] = struct{}{}
}

func (r *StateRow) String() string {
	return fmt.Sprintf("(%x, %c, %x)", r.Ref[:], r.Kind, r.Sub[:])
}

// Encoding: varints, strings as a length and their bytes, refs as 16
// bytes, evKeys as time and id; each row's data starts with
// stateVersion.

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendEvKey(b []byte, k evKey) []byte {
	b = binary.AppendVarint(b, k.t)
	return append(b, k.id[:]...)
}

func appendClient(b []byte, c *Client) []byte {
	if c == nil {
		return append(b, 0)
	}
	flags := byte(1)
	if c.Consented {
		flags |= 2
	}
	if c.Server {
		flags |= 4
	}
	b = append(b, flags)
	for _, s := range [...]string{c.Source, c.Country, c.Region, c.Device, c.Browser, c.OS, c.Locale} {
		b = appendString(b, s)
	}
	return b
}

func appendPartDay(b []byte, pd *partDay) []byte {
	b = append(b, stateVersion)
	for _, k := range [...]evKey{pd.first, pd.last, pd.page, pd.clientAt} {
		b = appendEvKey(b, k)
	}
	b = binary.AppendVarint(b, int64(pd.events))
	b = binary.AppendVarint(b, int64(pd.pageviews))
	b = binary.AppendVarint(b, int64(pd.orders))
	b = appendString(b, pd.lastPath)
	b = appendClient(b, pd.client)
	x := pd.x
	if x == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	// In a canonical order (their order in memory is that of the events'
	// arrival, which nothing reads): equal days encode alike.
	slices.SortFunc(x.hits, func(p, q hit) int { return cmp.Or(cmp.Compare(p.t, q.t), strings.Compare(p.action, q.action)) })
	slices.Sort(x.purchases)
	slices.SortFunc(x.exposures, func(p, q exposure) int {
		return cmp.Or(p.at.cmp(q.at), strings.Compare(p.experiment, q.experiment), strings.Compare(p.variant, q.variant))
	})
	b = binary.AppendUvarint(b, uint64(len(x.revenue)))
	for _, a := range x.revenue {
		b = appendString(b, a.Currency)
		b = binary.AppendVarint(b, a.Micro)
	}
	b = appendEvKey(b, x.identAt)
	b = appendString(b, x.traits)
	b = binary.AppendUvarint(b, uint64(len(x.hits)))
	for _, h := range x.hits {
		b = appendString(b, h.action)
		b = binary.AppendVarint(b, h.t)
	}
	b = binary.AppendUvarint(b, uint64(len(x.exposures)))
	for _, xp := range x.exposures {
		b = appendEvKey(b, xp.at)
		b = appendString(b, xp.experiment)
		b = appendString(b, xp.variant)
	}
	b = binary.AppendUvarint(b, uint64(len(x.purchases)))
	for _, p := range x.purchases {
		b = binary.AppendVarint(b, p)
	}
	return b
}

// stateSignIn is a sign-in read from a browser's row, linked once every
// node is read.
type stateSignIn struct {
	browser *node
	user    Ref
	at      evKey
}

// nodeVersion is the first byte of a part's row: 3 has the person
// number after the kind (activity.go); 2 had none; 2 and 3 have the
// sign-ins before the body, so that a restore can keep the body encoded
// (1, the first format, had them after it).
const (
	nodeVersion   = 3
	nodeVersionV2 = 2
)

// appendNode encodes a part: version, kind, raw id; its sign-ins (user
// ref, time and event id); then its body (appendNodeBody), as restored
// when the part was not opened since.
func appendNode(b []byte, n *node) []byte {
	b = append(b, nodeVersion, n.kind)
	b = binary.AppendUvarint(b, uint64(n.num))
	b = appendString(b, n.raw)
	users := make([]*node, 0, len(n.signIns))
	for u := range n.signIns {
		users = append(users, u)
	}
	slices.SortFunc(users, func(a, b *node) int { return bytesCompare16(&a.ref, &b.ref) })
	b = binary.AppendUvarint(b, uint64(len(users)))
	for _, u := range users {
		b = append(b, u.ref[:]...)
		b = appendEvKey(b, n.signIns[u])
	}
	if n.enc != nil {
		if len(n.days) > 0 || len(n.frozen) > 0 {
			panic(fmt.Sprintf("facts: part %x was changed before it was opened", n.ref[:]))
		}
		return append(b, n.enc...)
	}
	return appendNodeBody(b, n)
}

// appendNodeBody encodes a part's days (number, activity) and its cold
// visits' touches (visit id, touch).
func appendNodeBody(b []byte, n *node) []byte {
	b = binary.AppendUvarint(b, uint64(len(n.days)))
	for _, d := range n.days {
		b = binary.AppendVarint(b, int64(d.num))
		b = appendPartDay(b, d.pd)
	}
	// By visit id, whatever order the visits went cold in: equal states
	// encode alike.
	slices.SortFunc(n.frozen, func(a, b touchInfo) int { return bytesCompare16(&a.id, &b.id) })
	b = binary.AppendUvarint(b, uint64(len(n.frozen)))
	for _, t := range n.frozen {
		b = append(b, t.id[:]...)
		b = appendTouchInfo(b, t)
	}
	return b
}

func appendTouch(b []byte, t *channels.Touch) []byte {
	if t == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	for _, s := range [...]string{t.Channel, t.Source, t.Medium, t.Campaign, t.Term, t.Content, t.AdPlatform, t.ClickID, t.RefHost, t.RefName} {
		b = appendString(b, s)
	}
	return b
}

func appendTouchInfo(b []byte, t touchInfo) []byte {
	b = append(b, stateVersion)
	b = binary.AppendVarint(b, t.at)
	b = appendTouch(b, t.touch)
	b = appendString(b, t.landing)
	b = binary.LittleEndian.AppendUint64(b, t.row)
	self := byte(0)
	if t.self {
		self = 1
	}
	return append(b, self, t.parts)
}

func appendSummary(b []byte, status byte, lo, hi int64, c *coldDay) []byte {
	b = append(b, stateVersion, status)
	b = binary.AppendVarint(b, lo)
	b = binary.AppendVarint(b, hi)
	if c == nil {
		return b
	}
	b = binary.AppendUvarint(b, uint64(c.visits))
	b = binary.LittleEndian.AppendUint64(b, c.sum)
	b = binary.AppendUvarint(b, uint64(len(c.ids.bits)))
	for _, w := range c.ids.bits {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return b
}

// appendMembers encodes a membership: the count and the segments' refs.
func appendMembers(b []byte, mem []string) []byte {
	b = append(b, stateVersion)
	b = binary.AppendUvarint(b, uint64(len(mem)))
	for _, s := range mem {
		b = appendString(b, s)
	}
	return b
}

// appendResidents appends the ids of a cold day's residents' visits.
func appendResidents(b []byte, ids []Ref) []byte {
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = append(b, id[:]...)
	}
	return b
}

// residents returns the ids of the visits whose events stay in memory on
// cold day d (Freeze's residents), sorted; nil when none.
func (e *Engine) residents(d int32) []Ref {
	dd := e.days[d]
	if dd == nil || e.cold[d] == nil {
		return nil
	}
	seen := map[Ref]bool{}
	var ids []Ref
	for _, ev := range dd.events {
		if v := e.visitOf(ev); v != nil && !seen[v.id] {
			seen[v.id] = true
			ids = append(ids, v.id)
		}
	}
	slices.SortFunc(ids, func(a, b Ref) int { return bytesCompare16(&a, &b) })
	return ids
}

// stateDecoder reads a row's data; the first error sticks. clients and
// touches, when set, share the decoded clients and touches by their
// encoded bytes (a restore decodes the same few thousand a million times).
type stateDecoder struct {
	b       []byte
	err     error
	clients map[string]*Client
	touches map[string]*channels.Touch
}

func (d *stateDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated or corrupt %s", what)
	}
	d.b = nil
}

func (d *stateDecoder) version() {
	if v := d.byte(); v != stateVersion && d.err == nil {
		d.err = fmt.Errorf("state format %d, want %d", v, stateVersion)
	}
}

func (d *stateDecoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *stateDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *stateDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *stateDecoder) uint64() uint64 {
	if len(d.b) < 8 {
		d.fail("uint64")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *stateDecoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("count")
		return 0
	}
	return int(n)
}

func (d *stateDecoder) string() string {
	n := d.count()
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// interned returns a string, the engine's shared copy.
func (d *stateDecoder) interned(e *Engine) string {
	n := d.count()
	s := e.in.getBytes(d.b[:n])
	d.b = d.b[n:]
	return s
}

// skipStrings passes n strings and returns the bytes they took.
func (d *stateDecoder) skipStrings(n int) []byte {
	// Inline, not through count: a restore passes every string of every
	// part's body (skipNodeBody), nearly all shorter than 128 bytes.
	b, i := d.b, 0
	for range n {
		var k uint64
		for shift := uint(0); ; shift += 7 {
			if i >= len(b) || shift > 63 {
				d.fail("string length")
				return nil
			}
			c := b[i]
			i++
			k |= uint64(c&0x7f) << shift
			if c < 0x80 {
				break
			}
		}
		if k > uint64(len(b)-i) {
			d.fail("string")
			return nil
		}
		i += int(k)
	}
	d.b = b[i:]
	return b[:i]
}

func (d *stateDecoder) evKey() evKey {
	k := evKey{t: d.varint()}
	if len(d.b) < 16 {
		d.fail("event key")
		return evKey{}
	}
	k.id = records.UUID(d.b[:16])
	d.b = d.b[16:]
	return k
}

func (d *stateDecoder) ref() Ref {
	if len(d.b) < 16 {
		d.fail("ref")
		return Ref{}
	}
	r := Ref(d.b[:16])
	d.b = d.b[16:]
	return r
}

// node decodes a part's row (appendNode); its sign-ins go to signIns. Its
// body stays encoded (node.enc), checked, until the part is opened.
func (d *stateDecoder) node(e *Engine, ref Ref, signIns *[]stateSignIn) *node {
	v := d.byte()
	if v == stateVersion {
		return d.nodeV1(e, ref, signIns)
	}
	if v != nodeVersion && v != nodeVersionV2 {
		d.fail(fmt.Sprintf("part format %d", v))
		return &node{ref: ref}
	}
	n := &node{ref: ref, kind: d.byte()}
	if v == nodeVersion {
		num := d.uvarint()
		if num > 1<<32-1 {
			d.fail("person number")
		}
		n.num = uint32(num)
	}
	n.raw = d.string()
	if n.kind == KindUser {
		n.raw = e.in.get(n.raw)
	}
	for range d.count() {
		u := d.ref()
		*signIns = append(*signIns, stateSignIn{browser: n, user: u, at: d.evKey()})
	}
	body := d.b
	d.skipNodeBody()
	if d.err == nil {
		n.enc = bytes.Clone(body)
	}
	return n
}

// withoutNumber returns a row's data, a part's without its person
// number: two engines given the same events in another order number
// their persons otherwise (DiffStates).
func withoutNumber(r *StateRow) []byte {
	b := r.Data
	if r.Kind != StateNode || len(b) < 3 || b[0] != nodeVersion {
		return b
	}
	_, k := binary.Uvarint(b[2:])
	if k <= 0 {
		return b
	}
	return append([]byte{b[0], b[1], 0}, b[2+k:]...)
}

// open decodes the bodies of part n and of the parts its sign-ins link
// it to, directly or not (a person's parts, and every part whose claim
// depends on the same sign-ins), so that what the engine reaches through
// the links between parts is decoded. The bodies were checked when
// restored.
func (e *Engine) open(n *node) {
	if n.enc == nil {
		return
	}
	queue := []*node{n}
	var opened []*node
	for len(queue) > 0 {
		p := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if p.enc == nil {
			continue
		}
		opened = append(opened, p)
		if len(p.days) > 0 || len(p.frozen) > 0 {
			panic(fmt.Sprintf("facts: part %x was changed before it was opened", p.ref[:]))
		}
		d := stateDecoder{b: p.enc}
		p.enc = nil
		d.nodeBody(e, p)
		if d.err != nil {
			panic(fmt.Sprintf("facts: the state of part %x, checked when restored, does not decode: %v", p.ref[:], d.err))
		}
		for u := range p.signIns {
			queue = append(queue, u)
		}
		for b := range p.signed {
			queue = append(queue, b)
		}
		for b := range p.claimed {
			queue = append(queue, b)
		}
		if p.claimer != nil {
			queue = append(queue, p.claimer)
		}
	}
	// The persons opened have, in the day sets, the days their parts
	// restored: learned now, before anything changes them, their
	// computes need not look them up in every day (activity.go).
	for _, p := range opened {
		if q := personOf(p); q != nil && q.actState == actUnknown && isPerson(q) {
			e.learnActivity(q)
		}
	}
}

// nodeV1 decodes a part's row of the first format: kind, raw, body,
// sign-ins.
func (d *stateDecoder) nodeV1(e *Engine, ref Ref, signIns *[]stateSignIn) *node {
	n := &node{ref: ref, kind: d.byte()}
	n.raw = d.string()
	if n.kind == KindUser {
		n.raw = e.in.get(n.raw)
	}
	d.nodeBody(e, n)
	for range d.count() {
		u := d.ref()
		*signIns = append(*signIns, stateSignIn{browser: n, user: u, at: d.evKey()})
	}
	if d.err != nil {
		n.days, n.frozen = nil, nil
	}
	return n
}

// nodeBody decodes a part's body (appendNodeBody) into n.
func (d *stateDecoder) nodeBody(e *Engine, n *node) {
	days := d.count()
	n.days = make(partDays, 0, days)
	for range days {
		num := int32(d.varint())
		if k := len(n.days); k > 0 && num <= n.days[k-1].num {
			d.fail("days out of order")
		}
		n.days = append(n.days, numDay{num: num, pd: d.partDay(e)})
	}
	if k := d.count(); k > 0 {
		n.frozen = make([]touchInfo, 0, k)
		for range k {
			id := d.ref()
			t := d.touchInfo(e)
			t.id = id
			n.frozen = append(n.frozen, t)
		}
	}
}

// skipNodeBody passes a part's body (appendNodeBody), checking it as
// nodeBody would decode it, without keeping anything.
func (d *stateDecoder) skipNodeBody() {
	days := d.count()
	last := int32(math.MinInt32)
	for i := range days {
		num := int32(d.varint())
		if i > 0 && num <= last {
			d.fail("days out of order")
		}
		last = num
		d.skipPartDay()
	}
	d.touchIDs(nil)
}

// touchIDs passes the cold visits' touches of a part's body (after its
// days), calling fn (when not nil) with each one's visit id until fn
// returns false; it decodes nothing else.
func (d *stateDecoder) touchIDs(fn func(Ref) bool) {
	for range d.count() {
		id := d.ref()
		d.version()
		d.varint()
		if d.byte() == 1 {
			d.skipStrings(10)
		}
		d.skipStrings(1)
		d.uint64()
		d.byte()
		d.byte()
		if d.err != nil || fn != nil && !fn(id) {
			return
		}
	}
}

// encodedTouch reports whether the body of a part not opened (node.enc)
// has the touch of a cold visit whose id is in ids, reading past its days
// without decoding them.
func encodedTouch(body []byte, ids map[Ref]bool) bool {
	d := stateDecoder{b: body}
	for range d.count() {
		d.varint()
		d.skipPartDay()
	}
	found := false
	d.touchIDs(func(id Ref) bool {
		found = ids[id]
		return !found
	})
	if d.err != nil {
		// Checked when restored: a body that does not decode is a bug.
		panic(fmt.Sprintf("facts: a part's state, checked when restored, does not decode: %v", d.err))
	}
	return found
}

func (d *stateDecoder) skipPartDay() {
	d.version()
	for range 4 {
		d.evKey()
	}
	for range 3 {
		d.varint()
	}
	d.skipStrings(1)
	if d.byte()&1 != 0 {
		d.skipStrings(7)
	}
	if d.byte() != 1 {
		return
	}
	for range d.count() {
		d.skipStrings(1)
		d.varint()
	}
	d.evKey()
	d.skipStrings(1)
	for range d.count() {
		d.skipStrings(1)
		d.varint()
	}
	for range d.count() {
		d.evKey()
		d.skipStrings(2)
	}
	for range d.count() {
		d.varint()
	}
}

func (d *stateDecoder) client(e *Engine) *Client {
	start := d.b
	if d.byte()&1 == 0 {
		return nil
	}
	body := d.b
	key := start[:1+len(d.skipStrings(7))]
	if d.err != nil {
		return nil
	}
	if c, ok := d.clients[string(key)]; ok {
		return c
	}
	sd := stateDecoder{b: body}
	c := Client{Consented: key[0]&2 != 0, Server: key[0]&4 != 0}
	for _, p := range [...]*string{&c.Source, &c.Country, &c.Region, &c.Device, &c.Browser, &c.OS, &c.Locale} {
		*p = sd.string()
	}
	p := e.client(c)
	if d.clients != nil {
		d.clients[string(key)] = p
	}
	return p
}

// touch decodes a touch (appendTouch).
func (d *stateDecoder) touch(e *Engine) *channels.Touch {
	if d.byte() != 1 {
		return nil
	}
	key := d.skipStrings(10)
	if d.err != nil {
		return nil
	}
	if t, ok := d.touches[string(key)]; ok {
		return t
	}
	sd := stateDecoder{b: key}
	var tc channels.Touch
	for _, p := range [...]*string{&tc.Channel, &tc.Source, &tc.Medium, &tc.Campaign, &tc.Term, &tc.Content, &tc.AdPlatform, &tc.ClickID, &tc.RefHost, &tc.RefName} {
		*p = sd.string()
	}
	t := e.touchOf(tc)
	if d.touches != nil {
		d.touches[string(key)] = t
	}
	return t
}

func (d *stateDecoder) partDay(e *Engine) *partDay {
	d.version()
	pd := &partDay{first: d.evKey(), last: d.evKey(), page: d.evKey(), clientAt: d.evKey()}
	pd.events, pd.pageviews, pd.orders = int32(d.varint()), int32(d.varint()), int32(d.varint())
	pd.lastPath = d.interned(e)
	pd.client = d.client(e)
	if d.byte() != 1 {
		return pd
	}
	x := pd.extra()
	for range d.count() {
		cur := d.interned(e)
		x.revenue = append(x.revenue, Amount{Currency: cur, Micro: d.varint()})
	}
	x.identAt = d.evKey()
	x.traits = d.string()
	for range d.count() {
		x.hits = append(x.hits, hit{action: d.interned(e), t: d.varint()})
	}
	for range d.count() {
		xp := exposure{at: d.evKey()}
		xp.experiment = d.interned(e)
		xp.variant = d.interned(e)
		x.exposures = append(x.exposures, xp)
	}
	for range d.count() {
		x.purchases = append(x.purchases, d.varint())
	}
	return pd
}

func (d *stateDecoder) touchInfo(e *Engine) touchInfo {
	d.version()
	t := touchInfo{at: d.varint()}
	t.touch = d.touch(e)
	t.landing = d.interned(e)
	t.row = d.uint64()
	t.self = d.byte() == 1
	t.parts = d.byte()
	return t
}

// done reports the decoder's error, or bytes left over, for row r.
func (d *stateDecoder) done(r *StateRow) error {
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes left over", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("state row %s: %w", r, d.err)
	}
	return nil
}

// pendingClaims returns the browsers whose claims wait (claimWant) with
// a visit on a cold day whose row credits them (those PendingClaimDays
// names days for), as StateClaim rows name them.
func (e *Engine) pendingClaims() map[Ref]bool {
	out := make(map[Ref]bool, len(e.claimWant))
	for b := range e.claimWant {
		if b.kind != KindBrowser || b.erased {
			continue
		}
		for _, ti := range b.frozen {
			if ti.self && e.cold[e.DayOf(ti.at)] != nil {
				out[b.ref] = true
				break
			}
		}
	}
	return out
}

// ClaimsRestored reports whether the engine was restored from state rows
// that hold every pending claim (StateClaim): the claims then wait in it
// for ReclaimDays, and a checkpoint's reclaim days need not be written
// whole (RewriteVisitDays).
func (e *Engine) ClaimsRestored() bool { return e.claimsRestored }

// WriteWholeState has the next Flush output every state row (an engine
// folded from tables written without them).
func (e *Engine) WriteWholeState() { e.stateAll = true }

// stateChanges puts into ch the state rows that changed since the last
// Flush (every row when all or stateAll), and forgets them unless all
// (All leaves the engine as it was).
func (e *Engine) stateChanges(ch *Changes, all bool) {
	whole := all || e.stateAll
	ch.State = map[int][]StateRow{}
	add := func(r StateRow) {
		b := Bucket(r.Ref)
		ch.State[b] = append(ch.State[b], r)
	}
	if whole {
		ch.StateWhole = true
		for _, n := range e.nodes {
			if n.kind != KindVisitor && !n.erased {
				add(StateRow{Ref: n.ref, Kind: StateNode, Data: appendNode(nil, n)})
			}
		}
		for b := range Buckets {
			for ref, mem := range e.bx.members[b] {
				add(StateRow{Ref: ref, Kind: StateMembers, Data: appendMembers(nil, mem)})
			}
		}
		for ref := range e.pendingClaims() {
			add(StateRow{Ref: ref, Kind: StateClaim, Data: []byte{stateVersion}})
		}
		if !all {
			e.claimOut = e.pendingClaims()
		}
	} else {
		claims := e.pendingClaims()
		for ref := range claims {
			if !e.claimOut[ref] {
				add(StateRow{Ref: ref, Kind: StateClaim, Data: []byte{stateVersion}})
			}
		}
		for ref := range e.claimOut {
			if !claims[ref] {
				add(StateRow{Ref: ref, Kind: StateClaim})
			}
		}
		e.claimOut = claims
		for ref := range e.membersDirty {
			r := StateRow{Ref: ref, Kind: StateMembers}
			if mem, ok := e.bx.members[Bucket(ref)][ref]; ok {
				r.Data = appendMembers(nil, mem)
			}
			add(r)
		}
		// An erased part's ref may be a new part's again.
		byRef := make(map[Ref]*node, len(e.stateDirty))
		for n := range e.stateDirty {
			if n.kind == KindVisitor {
				continue
			}
			if o := byRef[n.ref]; o == nil || o.erased {
				byRef[n.ref] = n
			}
		}
		for ref, n := range byRef {
			r := StateRow{Ref: ref, Kind: StateNode}
			if !n.erased {
				r.Data = appendNode(nil, n)
			}
			add(r)
		}
	}
	for b := range ch.State {
		slices.SortFunc(ch.State[b], func(x, y StateRow) int { return CompareStateKeys(&x, &y) })
	}
	if len(ch.State) == 0 {
		ch.State = nil
	}
	// The days: those whose summary changed, and the hot ones whose
	// span did (or that are hot no more).
	hot := e.hotSpans()
	// The cold days' residents, each list by a hash of it.
	res := map[int32][]Ref{}
	resSum := map[int32]uint64{}
	for d := range e.days {
		if ids := e.residents(d); len(ids) > 0 {
			res[d] = ids
			h := uint64(len(ids))
			for _, id := range ids {
				h = h*0x9e3779b97f4a7c15 + personHash(id)
			}
			resSum[d] = h
		}
	}
	days := map[int32]bool{}
	if whole {
		for d := range e.cold {
			days[d] = true
		}
		for d := range e.finalSpan {
			days[d] = true
		}
		for d := range hot {
			days[d] = true
		}
	} else {
		for d := range e.summaryDirty {
			days[d] = true
		}
		for d, s := range hot {
			if o, ok := e.hotOut[d]; !ok || o != s {
				days[d] = true
			}
		}
		for d := range e.hotOut {
			if _, ok := hot[d]; !ok {
				days[d] = true
			}
		}
		for d, h := range resSum {
			if e.residentsOut[d] != h {
				days[d] = true
			}
		}
		for d := range e.residentsOut {
			if _, ok := resSum[d]; !ok {
				days[d] = true
			}
		}
	}
	for d := range days {
		r := StateRow{Kind: StateSummary, Sub: daySub(d)}
		if c := e.cold[d]; c != nil {
			r.Data = appendResidents(appendSummary(nil, summaryCold, c.lo, c.hi, c), res[d])
		} else if s, ok := hot[d]; ok {
			r.Data = appendSummary(nil, summaryHot, s[0], s[1], nil)
		} else if s, ok := e.finalSpan[d]; ok {
			r.Data = appendSummary(nil, summaryFinal, s[0], s[1], nil)
		}
		if r.Data == nil && whole {
			continue
		}
		ch.StateDays = append(ch.StateDays, r)
	}
	eng := []byte{stateVersion, 0}
	if e.final {
		eng[1] = 1
	}
	eng = binary.AppendVarint(eng, int64(e.finalThrough))
	eng = append(eng, engineHoldsMembers|engineHoldsClaims)
	if whole || !bytes.Equal(eng, e.engineOut) {
		ch.StateDays = append(ch.StateDays, StateRow{Kind: StateEngine, Data: eng})
	}
	slices.SortFunc(ch.StateDays, func(x, y StateRow) int { return CompareStateKeys(&x, &y) })
	if all {
		return
	}
	clear(e.stateDirty)
	clear(e.membersDirty)
	clear(e.summaryDirty)
	e.hotOut = hot
	e.residentsOut = resSum
	e.engineOut = eng
	e.stateAll = false
}

// restoreState has the next Flush output again the state rows of ch,
// which were not stored.
func (e *Engine) restoreState(ch *Changes) {
	if ch.StateWhole {
		e.stateAll = true
	}
	for _, rows := range ch.State {
		for _, r := range rows {
			if r.Kind == StateMembers {
				e.membersDirty[r.Ref] = true
				continue
			}
			if r.Kind == StateClaim {
				// Not stored: as the table has it again.
				if r.Data != nil {
					delete(e.claimOut, r.Ref)
				} else {
					e.claimOut[r.Ref] = true
				}
				continue
			}
			if n := e.nodes[r.Ref]; n != nil {
				e.stateDirty[n] = true
			} else {
				// Gone since (erased): its row is deleted.
				e.stateDirty[&node{ref: r.Ref, kind: KindBrowser, erased: true}] = true
			}
		}
	}
	for _, r := range ch.StateDays {
		switch r.Kind {
		case StateSummary:
			d := subDay(r.Sub)
			e.summaryDirty[d] = true
			delete(e.hotOut, d)
			delete(e.residentsOut, d)
		case StateEngine:
			e.engineOut = nil
		}
	}
}

// DiffStates describes the first difference between two engines' state
// rows (State), "" when equal.
func DiffStates(a, b []StateRow) string {
	for i := 0; i < max(len(a), len(b)); i++ {
		if i >= len(a) || i >= len(b) {
			return fmt.Sprintf("%d rows against %d", len(a), len(b))
		}
		if x, y := withoutNumber(&a[i]), withoutNumber(&b[i]); CompareStateKeys(&a[i], &b[i]) != 0 || !bytes.Equal(x, y) {
			k := 0
			for k < len(x) && k < len(y) && x[k] == y[k] {
				k++
			}
			lo := max(0, k-24)
			return fmt.Sprintf("row %d: %s, byte %d of %d: %x|%x; against %s, byte %d of %d: %x|%x", i, a[i].String(), k, len(x), x[lo:k], x[k:min(len(x), k+48)],
				b[i].String(), k, len(y), y[lo:k], y[k:min(len(y), k+48)])
		}
	}
	return ""
}

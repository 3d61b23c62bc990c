package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
)

// Change events on the log (docs/catalog.md). A message on the catalog
// topic is one record:
//
//	{"v":1,"tx":"<uuid>","part":0,"parts":1,"base":17,"changes":[{"type":"flag.put","data":{…}},…]}
//
// An apply may span several records (parts) of one transaction; the
// transaction takes effect when its last part has been read, and only when
// base, if present, equals the log sequence of the last provisioning
// transaction that took effect (optimistic concurrency: a transaction
// planned on an older catalog is dropped by every process alike, and its
// author plans again). Records without base (runtime facts such as an
// exposed secret key) always take effect.

// recordVersion is the `v` of the records this package writes and reads.
const recordVersion = 1

// Change types.
const (
	typeOrganization = "organization.put"
	typeUser         = "user.put"
	typeAPIKey       = "apikey.put"
	typeProject      = "project.put"
	typeSource       = "source.put"
	typeAction       = "action.put"
	typeFunnel       = "funnel.put"
	typeSegment      = "segment.put"
	typeFlag         = "flag.put"
	typeProvider     = "provider.put"
	typeKeyExposed   = "source.key_exposed"
)

// change is one event: a type and its entity.
type change struct {
	typ   string
	value any
}

// keyExposed is the data of a source.key_exposed event.
type keyExposed struct {
	Source  string `json:"source"`
	KeyHash string `json:"keyHash"`
}

func (c change) describe() string {
	switch v := c.value.(type) {
	case *Organization:
		return v.ID
	case *User:
		return v.ID
	case *APIKey:
		return "user " + v.User + " key " + v.Hash[:12] + "…"
	case *Project:
		return v.ID
	case *Source:
		return v.ID
	case *Action:
		return v.ID
	case *Funnel:
		return v.ID
	case *Segment:
		return v.ID
	case *Flag:
		return v.Project + "/" + v.Key
	case *Provider:
		return v.Project + "/" + v.Name
	case *keyExposed:
		return v.Source
	}
	return ""
}

// apply changes the model by one event. Entities are replaced, never
// modified.
func (m *model) apply(c change) {
	switch v := c.value.(type) {
	case *Organization:
		m.orgs[v.ID] = v
	case *User:
		m.users[v.ID] = v
	case *APIKey:
		m.apiKeys[v.Hash] = v
	case *Project:
		m.projects[v.ID] = v
		m.dirty[v.ID] = true
	case *Source:
		m.sources[v.ID] = v
	case *Action:
		m.actions[v.ID] = v
	case *Funnel:
		m.funnels[v.ID] = v
	case *Segment:
		m.segments[v.ID] = v
		m.dirty[v.Project] = true
	case *Flag:
		m.putFlag(v)
	case *Provider:
		m.putProvider(v)
	case *keyExposed:
		m.exposed[v.KeyHash] = true
	}
}

// decodeChange reads one event. ok is false for a type this version does
// not know (written by a newer mf): it is skipped.
func decodeChange(typ string, data json.RawMessage, locs *locations) (c change, ok bool, err error) {
	var v any
	switch typ {
	case typeOrganization:
		v = &Organization{}
	case typeUser:
		v = &User{}
	case typeAPIKey:
		v = &APIKey{}
	case typeProject:
		v = &Project{}
	case typeSource:
		v = &Source{}
	case typeAction:
		v = &Action{}
	case typeFunnel:
		v = &Funnel{}
	case typeSegment:
		v = &Segment{}
	case typeFlag:
		v = &Flag{}
	case typeProvider:
		v = &Provider{}
	case typeKeyExposed:
		v = &keyExposed{}
	default:
		return change{}, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return change{}, false, fmt.Errorf("cannot decode %s event: %w", typ, err)
	}
	switch e := v.(type) {
	case *Project:
		loc, err := locs.load(e.Timezone)
		if err != nil {
			return change{}, false, fmt.Errorf("cannot decode %s event: time zone %q: %w", typ, e.Timezone, err)
		}
		e.loc = loc
	case *Flag:
		for k, p := range e.Payloads {
			cp, err := canonicalRaw(p)
			if err != nil {
				return change{}, false, fmt.Errorf("cannot decode %s event: value of variant %q: %w", typ, k, err)
			}
			e.Payloads[k] = cp
		}
		if e.Rules == nil {
			e.Rules = []Rule{}
		}
	}
	return change{typ: typ, value: v}, true, nil
}

// record is one message of the catalog topic.
type record struct {
	V       int            `json:"v"`
	Tx      string         `json:"tx"`
	Part    int            `json:"part"`
	Parts   int            `json:"parts"`
	Base    *uint64        `json:"base,omitempty"`
	Changes []recordChange `json:"changes"`
}

type recordChange struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

// encodeRecords splits a transaction's changes into records of at most
// about maxBytes each (a single larger change gets a record of its own).
func encodeRecords(tx string, base *uint64, changes []change, maxBytes int) ([][]byte, error) {
	var groups [][]recordChange
	var cur []recordChange
	size := 0
	for _, c := range changes {
		data, err := encodeValue(c.value)
		if err != nil {
			return nil, fmt.Errorf("cannot encode %s event: %w", c.typ, err)
		}
		n := len(data) + len(c.typ) + 32
		if len(cur) > 0 && size+n > maxBytes {
			groups = append(groups, cur)
			cur, size = nil, 0
		}
		cur = append(cur, recordChange{Type: c.typ, Data: data})
		size += n
	}
	if len(cur) > 0 || len(groups) == 0 {
		groups = append(groups, cur)
	}
	out := make([][]byte, len(groups))
	for i, g := range groups {
		rec := record{V: recordVersion, Tx: tx, Part: i, Parts: len(groups), Base: base, Changes: g}
		data, err := encodeValue(rec)
		if err != nil {
			return nil, fmt.Errorf("cannot encode catalog record: %w", err)
		}
		out[i] = data
	}
	return out, nil
}

// txOutcome is what became of a transaction once its last part was read.
type txOutcome struct {
	applied bool
	// seq is the log sequence of the last part.
	seq uint64
}

// folder folds records into a model, in log order.
type folder struct {
	m       *model
	logger  *slog.Logger
	lastSeq uint64
	pending map[string]*pendingTx
	locs    locations
}

// locations caches time zones by name (loading one reads the zone
// database).
type locations map[string]*time.Location

func (l *locations) load(name string) (*time.Location, error) {
	if loc, ok := (*l)[name]; ok {
		return loc, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	if *l == nil {
		*l = locations{}
	}
	(*l)[name] = loc
	return loc, nil
}

type pendingTx struct {
	base    *uint64
	parts   [][]recordChange
	have    int
	firstSq uint64
}

func newFolder(m *model, logger *slog.Logger) *folder {
	return &folder{m: m, logger: logger, pending: map[string]*pendingTx{}}
}

// fold reads the record at seq. It returns the transaction id and outcome
// when the record completed a transaction. Records at or below the last
// folded sequence (redeliveries) are ignored; so are records that cannot be
// read, which are logged: every process skips them alike.
func (fd *folder) fold(seq uint64, payload []byte) (tx string, out txOutcome, done bool) {
	if seq <= fd.lastSeq {
		return "", txOutcome{}, false
	}
	fd.lastSeq = seq
	var rec record
	if err := json.Unmarshal(payload, &rec); err != nil {
		fd.logger.Warn("catalog: skipping a record that cannot be read", "seq", seq, "err", err)
		return "", txOutcome{}, false
	}
	if rec.V != recordVersion {
		fd.logger.Warn("catalog: skipping a record of another version", "seq", seq, "v", rec.V)
		return "", txOutcome{}, false
	}
	if rec.Parts < 1 || rec.Part < 0 || rec.Part >= rec.Parts || rec.Tx == "" {
		fd.logger.Warn("catalog: skipping a malformed record", "seq", seq, "tx", rec.Tx, "part", rec.Part, "parts", rec.Parts)
		return "", txOutcome{}, false
	}
	p := fd.pending[rec.Tx]
	if p == nil {
		p = &pendingTx{base: rec.Base, parts: make([][]recordChange, rec.Parts), firstSq: seq}
		fd.pending[rec.Tx] = p
	}
	if len(p.parts) != rec.Parts {
		fd.logger.Warn("catalog: skipping a record whose part count disagrees with its transaction", "seq", seq, "tx", rec.Tx)
		return "", txOutcome{}, false
	}
	if p.parts[rec.Part] == nil {
		p.parts[rec.Part] = rec.Changes
		if p.parts[rec.Part] == nil {
			p.parts[rec.Part] = []recordChange{}
		}
		p.have++
	}
	if p.have < len(p.parts) {
		return "", txOutcome{}, false
	}
	delete(fd.pending, rec.Tx)
	out = txOutcome{seq: seq}
	if p.base != nil && *p.base != fd.m.configVersion {
		fd.logger.Debug("catalog: transaction planned on an older catalog dropped", "tx", rec.Tx, "base", *p.base, "current", fd.m.configVersion)
		return rec.Tx, out, true
	}
	var changes []change
	for _, part := range p.parts {
		for _, rc := range part {
			c, ok, err := decodeChange(rc.Type, rc.Data, &fd.locs)
			if err != nil {
				fd.logger.Warn("catalog: dropping a transaction with an event that cannot be read", "seq", seq, "tx", rec.Tx, "err", err)
				return rec.Tx, out, true
			}
			if !ok {
				fd.logger.Warn("catalog: skipping an event of an unknown type", "seq", seq, "tx", rec.Tx, "type", rc.Type)
				continue
			}
			changes = append(changes, c)
		}
	}
	for _, c := range changes {
		fd.m.apply(c)
	}
	fd.m.version = seq
	if p.base != nil {
		fd.m.configVersion = seq
	}
	out.applied = true
	return rec.Tx, out, true
}

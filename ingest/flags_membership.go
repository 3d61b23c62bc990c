package ingest

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/mfhq/mf/storage/catalog"
)

// UnitKind says which id names a unit of a segment lookup.
type UnitKind uint8

const (
	// UnitAnonymous is a browser or device, by its anonymous id.
	UnitAnonymous UnitKind = iota + 1
	// UnitUser is a signed-in person, by the caller's user id.
	UnitUser
)

func (k UnitKind) String() string {
	switch k {
	case UnitAnonymous:
		return "anonymous"
	case UnitUser:
		return "user"
	}
	return "unknown"
}

// MembershipUnit is one unit whose segment membership is asked for.
type MembershipUnit struct {
	Kind UnitKind
	// ID is the anonymous id or the user id, usable (evaluator.UsableID).
	ID string
	// Identified is the browser's word (POST /v1/flags/{websiteKey}
	// `identified`) that the visitor has signed in: a source may then
	// answer for the person the anonymous id belongs to.
	Identified bool
}

// MembershipResult is what a MembershipSource knows of one unit.
type MembershipResult struct {
	// In lists the refs the unit is in.
	In []string
	// Unavailable lists the refs that cannot be answered. A ref asked for
	// and in neither list is answered "not in".
	Unavailable []string
	// RefreshedAt is when the oldest of the segments answered (in or not
	// in) was last built; zero when none was answered.
	RefreshedAt time.Time
}

// MembershipSource answers segment membership from the segment tables that
// the processor builds. The flag endpoints ask it for the refs a document
// tests; it answers each unit in the order given (len(result) ==
// len(units)). An error answers every ref of every unit as unavailable.
type MembershipSource interface {
	Membership(ctx context.Context, project string, refs []string, units []MembershipUnit) ([]MembershipResult, error)
}

// NoMembership is the MembershipSource used until the processor provides
// one: it answers every ref as unavailable, which the specification
// allows (conditions on unavailable refs are false for both `in` and `not
// in`).
type NoMembership struct{}

// Membership answers every ref of every unit as unavailable.
func (NoMembership) Membership(_ context.Context, _ string, refs []string, units []MembershipUnit) ([]MembershipResult, error) {
	out := make([]MembershipResult, len(units))
	for i := range out {
		out[i].Unavailable = refs
	}
	return out, nil
}

// membership is one Membership object of an answer, its refs limited to
// those the document tests.
type membership struct {
	segments, unavailable []string
	refreshedAt           time.Time // zero: null
	stale                 bool
}

// allUnavailable answers every tested ref as unavailable.
func allUnavailable(tested []string) membership {
	return membership{unavailable: tested}
}

// normalizeMembership keeps to the refs the document tests: segments are
// the tested refs the unit is in (and that are not unavailable),
// unavailable the tested refs the source could not answer. stale is set
// when refreshedAt is older than freshness at now.
func normalizeMembership(tested []string, r MembershipResult, now time.Time, freshness time.Duration) membership {
	m := membership{refreshedAt: r.RefreshedAt}
	for _, ref := range tested {
		switch {
		case slices.Contains(r.Unavailable, ref):
			m.unavailable = append(m.unavailable, ref)
		case slices.Contains(r.In, ref):
			m.segments = append(m.segments, ref)
		}
	}
	if len(m.unavailable) == len(tested) {
		m.refreshedAt = time.Time{} // nothing answered
	}
	m.stale = !m.refreshedAt.IsZero() && now.Sub(m.refreshedAt) > freshness
	return m
}

// appendMembership writes the Membership object, keys in byte order:
// {"refreshedAt":…,"segments":[…],"stale":…,"unavailable":[…]}.
func appendMembership(dst []byte, m membership) []byte {
	dst = append(dst, `{"refreshedAt":`...)
	if m.refreshedAt.IsZero() {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, m.refreshedAt.UnixMilli(), 10)
	}
	dst = append(dst, `,"segments":`...)
	dst = appendStringList(dst, m.segments)
	dst = append(dst, `,"stale":`...)
	dst = strconv.AppendBool(dst, m.stale)
	dst = append(dst, `,"unavailable":`...)
	dst = appendStringList(dst, m.unavailable)
	return append(dst, '}')
}

func appendStringList(dst []byte, l []string) []byte {
	dst = append(dst, '[')
	for i, s := range l {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = catalog.AppendJSONString(dst, s)
	}
	return append(dst, ']')
}

package facts

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/mfhq/mf/storage/records"
)

// Ref is a 16-byte UUID naming a browser, a person, a consentless visitor
// of a day, or a visit. Refs are version-8 UUIDs derived from the project
// and what they name, so a replay derives the same refs.
type Ref = records.UUID

// Node kinds: what a Ref names.
const (
	KindBrowser = 'a' // an anonymousId
	KindUser    = 'u' // a userId (a signed-in person)
	KindVisitor = 'h' // a consentless visitor of one day (the edge's daily hash)
)

// NodeRef returns the ref of a browser (kind 'a', id the anonymousId), a
// person (kind 'u', id the userId) or a consentless visitor (kind 'h', id
// the hex of the daily visitor hash) of project:
//
//	SHA-256("mf/ref/v1" 0x00 project 0x00 kind 0x00 id)[0:16]
//
// with the version nibble set to 8 and the RFC 9562 variant bits.
func NodeRef(project string, kind byte, id string) Ref {
	h := sha256.New()
	h.Write([]byte("mf/ref/v1\x00"))
	h.Write([]byte(project))
	h.Write([]byte{0, kind, 0})
	h.Write([]byte(id))
	return uuid8(h.Sum(nil))
}

// VisitorRef returns the ref of a consentless visitor from the daily hash
// bytes of the edge.
func VisitorRef(project string, hash []byte) Ref {
	return NodeRef(project, KindVisitor, hex.EncodeToString(hash))
}

// visitRef returns the id of a visit found by inactivity: derived from its
// unit and its first event,
//
//	SHA-256("mf/visit/v1" 0x00 project 0x00 unit ref first event id)[0:16]
//
// as a version-8 UUID. A visit from a sessionId is that sessionId instead.
func visitRef(project string, unit Ref, first records.UUID) Ref {
	h := sha256.New()
	h.Write([]byte("mf/visit/v1\x00"))
	h.Write([]byte(project))
	h.Write([]byte{0})
	h.Write(unit[:])
	h.Write(first[:])
	return uuid8(h.Sum(nil))
}

func uuid8(sum []byte) Ref {
	var r Ref
	copy(r[:], sum[:16])
	r[6] = r[6]&0x0f | 0x80
	r[8] = r[8]&0x3f | 0x80
	return r
}

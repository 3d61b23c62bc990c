package ingest

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/mfhq/mf/evaluator"
	"github.com/mfhq/mf/storage/records"
)

// Batch intake, second half: Normalize turns a valid batch into the record
// that is stored, applying the rules that keep, drop or rewrite rather than
// refuse: the time window, derived event ids, placeholder ids, the page URL
// storage rules, `$search` query normalisation, `$exposure` validation,
// `$install_check`, `flagProperties`, the consentless drops and the
// Sec-GPC / DNT downgrade.

// NormalizeOptions are the request facts Normalize needs besides the batch.
type NormalizeOptions struct {
	// Downgrade stores a full batch as consentless: the request carried
	// `Sec-GPC: 1` or `DNT: 1` (see PrivacySignal). Identifiers, device
	// context and ad click id values are then not kept, and `$identify`,
	// `$search` and `$exposure` are dropped.
	Downgrade bool
}

// PrivacySignal reports whether a request's Sec-GPC or DNT header value asks
// for its full batch to be stored as consentless (a value of `1`).
func PrivacySignal(secGPC, dnt string) bool {
	return strings.TrimSpace(secGPC) == "1" || strings.TrimSpace(dnt) == "1"
}

// ReceiptInstallCheck is the receipt reason of a batch that held only
// `$install_check` events.
const ReceiptInstallCheck = "install_check"

// Normalize returns the record of a batch that DecodeBatch accepted, with its
// receipt (accepted, dropped, and reason `install_check` when the batch held
// only `$install_check` events). Project, Source, SourceKind and Edge are
// left for the caller. The record's properties share memory with b.
func Normalize(b *Batch, opts NormalizeOptions) *records.Batch {
	mode := b.mode
	if opts.Downgrade {
		mode = records.ModeConsentless
	}
	full := mode == records.ModeFull
	out := &records.Batch{
		Mode:       mode,
		ID:         b.id,
		ReceivedAt: b.receivedAt,
		SentAt:     b.sentAt,
	}
	out.Context.SDK = b.ctx.sdk
	if full {
		out.Context.Locale = b.ctx.locale
		out.Context.Timezone = b.ctx.timezone
		if b.ctx.hasScreen {
			out.Context.HasScreen = true
			out.Context.ScreenWidth, out.Context.ScreenHeight = b.ctx.screen[0], b.ctx.screen[1]
		}
	}
	installOnly := len(b.events) > 0
	events := make([]records.Event, 0, len(b.events))
	for i := range b.events {
		e := &b.events[i]
		if e.name != EventInstallCheck {
			installOnly = false
		}
		if ev, keep := normalizeEvent(b, e, full); keep {
			events = append(events, ev)
		}
	}
	if len(events) > 0 {
		out.Events = events
	}
	out.Receipt = records.Receipt{
		Batch:    b.idText,
		Accepted: len(events),
		Dropped:  len(b.events) - len(events),
	}
	if installOnly {
		out.Receipt.Reason = ReceiptInstallCheck
	}
	return out
}

// normalizeEvent returns the stored form of e and whether it is kept.
func normalizeEvent(b *Batch, e *batchEvent, full bool) (records.Event, bool) {
	out := records.Event{Name: e.name}
	switch e.name {
	case EventInstallCheck, EventFlagProperties:
		return out, false
	case EventIdentify, EventSearch, EventExposure:
		if !full {
			return out, false
		}
	}
	if e.flags&evHasProps != 0 {
		out.Properties = b.props[e.propStart:e.propEnd:e.propEnd]
	}
	if full {
		out.AnonymousID = storedID(e.anonymousID)
		out.UserID = storedID(e.userID)
		out.SessionID = e.session
	}
	switch e.name {
	case EventSearch:
		q, ok := "", false
		if e.flags&evHasQuery != 0 {
			q, ok = normalizeQuery(e.query)
		}
		if !ok {
			return out, false
		}
		out.Properties = replaceSpan(out.Properties, int(e.queryStart-e.propStart), int(e.queryEnd-e.propStart), q)
	case EventExposure:
		if !validExposure(e, out.AnonymousID != "" || out.UserID != "") {
			return out, false
		}
	}
	if e.flags&evHasRevenue != 0 && !strings.HasPrefix(e.name, "$") {
		if _, err := strconv.ParseFloat(e.revenue, 64); err == nil {
			out.Revenue = e.revenue
			if e.flags&evHasCurrency != 0 {
				out.Currency = currencyCode(e.currency)
			}
		}
	}
	out.ID = e.id
	if e.flags&evHasID == 0 {
		out.ID = DerivedEventID(b.id, int(e.index), e.time, e.flags&evHasTime != 0)
	}
	out.Time = eventTime(b, e)
	out.Page.URL = storedURL(e.url, true, full)
	out.Page.Title = e.title
	out.Page.Referrer = storedURL(e.referrer, false, false)
	return out, true
}

// eventTime is the event's `time`, else the batch's `sentAt`, else the time
// received; one more than 5 minutes ahead of or 30 days behind the time
// received is replaced by the time received.
func eventTime(b *Batch, e *batchEvent) int64 {
	t := b.receivedAt
	switch {
	case e.flags&evHasTime != 0:
		t = e.time
	case b.sentAt >= 0:
		t = b.sentAt
	}
	ahead := batchTimeAheadLimit.Milliseconds()
	behind := batchTimeBehindLimit.Milliseconds()
	if t-b.receivedAt > ahead || b.receivedAt-t > behind {
		return b.receivedAt
	}
	return t
}

// DerivedEventID is the id of an event sent without one: the first 16 bytes
// of SHA-256 over `mf:event:`, the 16 bytes of the batch id, the event's
// 0-based index in the batch as 4 bytes big-endian, and its `time` as sent
// (byte 1 then 8 bytes big-endian, or byte 0 when absent), made a UUID of
// version 8: byte 6 = (byte6 AND 0x0f) OR 0x80, byte 8 = (byte8 AND 0x3f)
// OR 0x80. A resent batch gets the same ids.
func DerivedEventID(batch records.UUID, index int, time int64, hasTime bool) records.UUID {
	const prefix = "mf:event:"
	var in [len(prefix) + 16 + 4 + 1 + 8]byte
	n := copy(in[:], prefix)
	n += copy(in[n:], batch[:])
	binary.BigEndian.PutUint32(in[n:], uint32(index))
	n += 4
	if hasTime {
		in[n] = 1
		binary.BigEndian.PutUint64(in[n+1:], uint64(time))
		n += 9
	} else {
		in[n] = 0
		n++
	}
	sum := sha256.Sum256(in[:n])
	var id records.UUID
	copy(id[:], sum[:16])
	id[6] = id[6]&0x0f | 0x80
	id[8] = id[8]&0x3f | 0x80
	return id
}

// storedID returns an anonymousId or userId as stored: empty when it is a
// placeholder.
func storedID(id string) string {
	if id == "" || placeholderID(id) {
		return ""
	}
	return id
}

// placeholderID reports whether id, with ASCII letters lower-cased and
// spaces, tabs, line breaks and quote characters trimmed, is empty or one of
// the placeholders of the specification.
func placeholderID(id string) bool {
	bare := strings.Trim(id, " \t\n\r\"'")
	if len(bare) > len("not_authenticated") {
		return false
	}
	var buf [len("not_authenticated")]byte
	for i := 0; i < len(bare); i++ {
		c := bare[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	switch string(buf[:len(bare)]) {
	case "", "undefined", "null", "none", "nan", "0", "true", "false", "anonymous", "guest",
		"id", "email", "distinct_id", "distinctid", "not_authenticated", "[object object]":
		return true
	}
	return false
}

// currencyCode returns c upper-cased when it is three ASCII letters, else "".
func currencyCode(c string) string {
	if len(c) != 3 {
		return ""
	}
	var b [3]byte
	for i := 0; i < 3; i++ {
		switch ch := c[i]; {
		case ch >= 'A' && ch <= 'Z':
			b[i] = ch
		case ch >= 'a' && ch <= 'z':
			b[i] = ch - ('a' - 'A')
		default:
			return ""
		}
	}
	return string(b[:])
}

// replaceSpan returns a copy of props with props[start:end] replaced by the
// JSON string v.
func replaceSpan(props []byte, start, end int, v string) []byte {
	out := make([]byte, 0, len(props)-(end-start)+len(v)+2)
	out = append(out, props[:start]...)
	out = evaluator.AppendJSONString(out, v)
	return append(out, props[end:]...)
}

package ingest

import (
	"net/http"
	"strconv"
	"time"

	"github.com/mfhq/mf/storage/records"
)

// Batch intake, first half: DecodeBatch reads a batch body (the Batch, Event,
// Properties and Context tables of the specification) in one pass with a
// hand-written scanner that checks the JSON grammar and every field rule as
// it goes, so error paths are exact and nothing is decoded twice. Normalize
// (normalize.go) then turns a valid batch into what is stored.

// Limits of the specification's Batch, Event, Properties and Context tables.
const (
	batchMaxEvents       = 1000
	batchMaxNameLen      = 128
	batchMaxIDLen        = 256
	batchMaxURLLen       = 2048
	batchMaxTitleLen     = 512
	batchMaxPropKeys     = 64
	batchMaxPropKeyLen   = 128
	batchMaxPropBytes    = 32768
	batchMaxPropLeaves   = 64
	batchMaxPropDepth    = 5
	batchMaxSDKNameLen   = 64
	batchMaxSDKVerLen    = 32
	batchMaxLocaleLen    = 35
	batchMaxTimezoneLen  = 64
	batchMaxScreen       = 32768
	batchMaxFieldErrors  = 10
	batchTimeAheadLimit  = 5 * time.Minute
	batchTimeBehindLimit = 30 * 24 * time.Hour
)

// Error codes of batch intake.
const (
	CodeInvalidJSON              = "invalid_json"
	CodeValidationFailed         = "validation_failed"
	CodeCollectionModeNotAllowed = "collection_mode_not_allowed"
)

// Problem is a refusal of a batch: the status and the error body of the
// specification's Errors section.
type Problem struct {
	Status int    `json:"-"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	// Errors lists up to ten broken rules, for validation_failed only.
	Errors []FieldError `json:"errors,omitempty"`
}

// FieldError is one broken rule: Path names the field (`mode`,
// `events.3.id`, `context.screen.0`; the empty path is the body itself) and
// never holds a value of the body; neither does Message.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

func (p *Problem) Error() string { return p.Code + ": " + p.Detail }

// DecodeOptions are the request facts DecodeBatch needs besides the body.
type DecodeOptions struct {
	// SourceMode is the collection mode of the source the batch arrived
	// through. A consentless source refuses a valid full batch with 400
	// collection_mode_not_allowed. Zero skips the check.
	SourceMode records.Mode
}

// Batch is a decoded batch that follows every rule of the specification. It
// is read only by Normalize; the accessors give the handler what it needs
// before that.
type Batch struct {
	idText     string
	id         records.UUID
	mode       records.Mode
	sentAt     int64 // -1 when absent
	receivedAt int64 // epoch milliseconds
	ctx        batchContext
	events     []batchEvent
	props      []byte // compact properties of every event, back to back
}

// IDText returns the batch id exactly as sent (the receipt echoes it).
func (b *Batch) IDText() string { return b.idText }

// ID returns the batch id (the idempotency key).
func (b *Batch) ID() records.UUID { return b.id }

// Mode returns the mode the batch was sent in.
func (b *Batch) Mode() records.Mode { return b.mode }

// Len returns the number of events sent (what rate limits charge).
func (b *Batch) Len() int { return len(b.events) }

// ReceivedAt returns the time received given to DecodeBatch, to the
// millisecond.
func (b *Batch) ReceivedAt() time.Time { return time.UnixMilli(b.receivedAt) }

type batchContext struct {
	sdk, locale, timezone string
	screen                [2]uint16
	// carried marks locale, timezone and screen sent non-null, valid or not
	// (consentless batches must carry none).
	carriedLocale, carriedTimezone, carriedScreen, hasScreen bool
}

// batchEvent is one event as sent; strings are empty when absent.
type batchEvent struct {
	name                 string
	url, title, referrer string
	anonymousID, userID  string
	revenue, currency    string // top-level properties, when of the right type
	query                string // top-level `query` when a string
	experiment, variant  string // top-level `$experiment`, `$variant` when strings
	time                 int64
	id, session          records.UUID
	index                int32
	propStart, propEnd   int32 // span of the compact properties in Batch.props
	queryStart, queryEnd int32 // span of the `query` value (quotes included)
	flags                uint16
}

// batchEvent flags.
const (
	evHasTime = 1 << iota
	evHasID
	evHasSession
	evHasProps
	evHasQuery
	evHasRevenue
	evHasCurrency
	evHasExperiment
	evHasVariant
	evCarriedAnon    // anonymousId sent non-null
	evCarriedUser    // userId sent non-null
	evCarriedSession // sessionId sent non-null
)

// Field error messages. None of them repeats a value of the body.
const (
	msgRequired       = "is required"
	msgDuplicateKey   = "is given more than once"
	msgObject         = "must be an object"
	msgString         = "must be a string"
	msgInteger        = "must be an integer (no fraction, no exponent, not a string)"
	msgIntRange       = "must be an integer from 0 to 9223372036854775807"
	msgVersion        = "must be 1"
	msgUUID           = "must be a UUID (8-4-4-4-12 hexadecimal digits)"
	msgMode           = "must be consentless or full"
	msgEventsList     = "must be a list of events"
	msgEventCount     = "must hold 1 to 1,000 events"
	msgNameLen        = "must be 1 to 128 characters"
	msgNameSpace      = "must not start or end with whitespace"
	msgNameReserved   = "is a reserved name: names starting with $ must be one of the events of the specification"
	msgURLLen         = "must be at most 2,048 characters"
	msgTitleLen       = "must be at most 512 characters"
	msgIDLen          = "must be 1 to 256 characters"
	msgIDBlank        = "must not be blank"
	msgDuplicateID    = "repeats the id of an earlier event"
	msgConsentless    = "is not allowed in a consentless batch"
	msgSDK            = "must have the form name/version: name 1 to 64 characters without /, version 1 to 32 characters"
	msgLocale         = "must be a BCP 47 language tag of 2 to 35 characters"
	msgTimezone       = "must be an IANA time zone name of 1 to 64 characters"
	msgScreenList     = "must be a list of exactly two integers [width, height]"
	msgScreenValue    = "must be an integer from 0 to 32,768"
	msgPropKeys       = "must have at most 64 keys at the top level"
	msgPropKeyLen     = "must not have a key longer than 128 characters"
	msgPropDuplicate  = "must not repeat a key within one object"
	msgPropBytes      = "must encode to at most 32,768 bytes"
	msgPropLeaves     = "must hold at most 64 values (a list counts as one, an empty object as one)"
	msgPropDepth      = "must not nest objects deeper than 5 levels"
	msgBodyObject     = "must be a JSON object"
	detailValidation  = "the batch breaks the rules listed in errors"
	detailModeRefused = "this source collects without consent only; it refuses batches in full mode"
)

// Reserved event names of the specification's Events section.
const (
	EventPageview     = "$pageview"
	EventAutocapture  = "$autocapture"
	EventIdentify     = "$identify"
	EventSearch       = "$search"
	EventExposure     = "$exposure"
	EventInstallCheck = "$install_check"
	// EventFlagProperties is a custom-looking name that is dropped.
	EventFlagProperties = "flagProperties"
)

func reservedEventName(name string) bool {
	switch name {
	case EventPageview, EventAutocapture, EventIdentify, EventSearch, EventExposure, EventInstallCheck:
		return true
	}
	return false
}

// DecodeBatch reads and validates a batch body. The body is read as JSON
// whatever its content type; it is copied, so the caller may reuse it. now
// is the time received. It returns the batch, or the Problem to answer with:
// 400 invalid_json when the body is not well-formed JSON in UTF-8 (a lone
// surrogate included), 400 validation_failed with up to ten field errors
// when it breaks a rule, 400 collection_mode_not_allowed when a valid full
// batch reaches a consentless source.
func DecodeBatch(body []byte, now time.Time, opts DecodeOptions) (*Batch, *Problem) {
	if len(body) >= 3 && string(body[:3]) == "\xef\xbb\xbf" {
		body = body[3:] // a byte order mark is ignored (RFC 8259, section 8.1)
	}
	src := string(body)
	b := &Batch{sentAt: -1, receivedAt: now.UnixMilli()}
	d := batchDecoder{jsonScanner: jsonScanner{src: src, data: body}, b: b}
	// Properties are typically a quarter of a batch; the arena grows past that.
	d.out = make([]byte, 0, len(src)/3+64)
	d.ws()
	isObject := d.peek() == '{'
	if isObject {
		d.batchObject()
	} else {
		d.skip()
		d.invalid(-1, "", msgBodyObject)
	}
	d.ws()
	if !d.failed() && d.pos != len(d.src) {
		d.fail("data after the JSON value")
	}
	if d.failed() {
		return nil, &Problem{Status: http.StatusBadRequest, Code: CodeInvalidJSON,
			Detail: "the body is not valid JSON in UTF-8: " + d.syntax + " at byte " + strconv.Itoa(d.errPos)}
	}
	if isObject {
		d.finish()
	}
	if len(d.errs) > 0 {
		return nil, &Problem{Status: http.StatusBadRequest, Code: CodeValidationFailed,
			Detail: detailValidation, Errors: d.errs}
	}
	if opts.SourceMode == records.ModeConsentless && b.mode == records.ModeFull {
		return nil, &Problem{Status: http.StatusBadRequest, Code: CodeCollectionModeNotAllowed, Detail: detailModeRefused}
	}
	b.props = d.out
	return b, nil
}

// batchDecoder reads one batch body.
type batchDecoder struct {
	jsonScanner
	b    *Batch
	errs []FieldError
	keys []string // member names of the property objects being read
	seen uint8    // required batch members seen
}

// Required batch members.
const (
	seenV = 1 << iota
	seenBatch
	seenMode
	seenEvents
	seenSentAt
	seenContext
)

// invalid records a broken rule at events.<ev>.<field> (ev < 0: <field>).
func (d *batchDecoder) invalid(ev int, field, msg string) {
	if len(d.errs) >= batchMaxFieldErrors {
		return
	}
	d.errs = append(d.errs, FieldError{Path: fieldPath(ev, field), Message: msg})
}

func fieldPath(ev int, field string) string {
	if ev < 0 {
		return field
	}
	p := "events." + strconv.Itoa(ev)
	if field != "" {
		p += "." + field
	}
	return p
}

// once marks a member seen and reports false (after recording the broken
// rule and skipping the value) when it was seen before.
func (d *batchDecoder) once(seen *uint16, bit uint16, ev int, field string) bool {
	if *seen&bit != 0 {
		d.invalid(ev, field, msgDuplicateKey)
		d.skip()
		return false
	}
	*seen |= bit
	return true
}

func (d *batchDecoder) batchObject() {
	var seen uint16
	for more := d.objectStart(); more && !d.failed(); more = d.next('}') {
		k, ok := d.key()
		if !ok {
			return
		}
		switch k {
		case "v":
			if d.once(&seen, seenV, -1, k) && !d.null() {
				d.seen |= seenV
				if v, msg := d.integer(); msg != "" || v != 1 {
					d.invalid(-1, k, msgVersion)
				}
			}
		case "batch":
			if d.once(&seen, seenBatch, -1, k) && !d.null() {
				d.seen |= seenBatch
				s, ok := d.stringValue()
				id, okID := records.ParseUUID(s)
				if !ok || !okID {
					d.invalid(-1, k, msgUUID)
				}
				d.b.idText, d.b.id = s, id
			}
		case "mode":
			if d.once(&seen, seenMode, -1, k) && !d.null() {
				d.seen |= seenMode
				s, _ := d.stringValue()
				switch s {
				case "consentless":
					d.b.mode = records.ModeConsentless
				case "full":
					d.b.mode = records.ModeFull
				default:
					d.invalid(-1, k, msgMode)
				}
			}
		case "sentAt":
			if d.once(&seen, seenSentAt, -1, k) && !d.null() {
				if v, msg := d.integer(); msg != "" {
					d.invalid(-1, k, msg)
				} else {
					d.b.sentAt = v
				}
			}
		case "context":
			if d.once(&seen, seenContext, -1, k) && !d.null() {
				d.context()
			}
		case "events":
			if d.once(&seen, seenEvents, -1, k) && !d.null() {
				d.seen |= seenEvents
				d.eventList()
			}
		default:
			d.skip()
		}
	}
}

// integer reads a JSON integer from 0 to MaxInt64 at pos; msg tells what is
// wrong otherwise.
func (d *batchDecoder) integer() (int64, string) {
	c := d.peek()
	if c != '-' && (c < '0' || c > '9') {
		d.skip()
		return 0, msgInteger
	}
	tok, isInt := d.number()
	if d.failed() || !isInt {
		return 0, msgInteger
	}
	if tok[0] == '-' {
		if tok == "-0" {
			return 0, ""
		}
		return 0, msgIntRange
	}
	if len(tok) > 19 {
		return 0, msgIntRange
	}
	v, err := strconv.ParseInt(tok, 10, 64)
	if err != nil {
		return 0, msgIntRange
	}
	return v, ""
}

// stringValue reads a string at pos; for any other value it skips it and
// reports false.
func (d *batchDecoder) stringValue() (string, bool) {
	if d.peek() != '"' {
		d.skip()
		return "", false
	}
	s, _ := d.str()
	return s, !d.failed()
}

func (d *batchDecoder) eventList() {
	if d.peek() != '[' {
		d.invalid(-1, "events", msgEventsList)
		d.skip()
		return
	}
	n := 0
	if c := len(d.src)/160 + 1; c < batchMaxEvents {
		d.b.events = make([]batchEvent, 0, c)
	} else {
		d.b.events = make([]batchEvent, 0, batchMaxEvents)
	}
	var extra batchEvent
	for more := d.arrayStart(); more && !d.failed(); more = d.next(']') {
		d.ws()
		if n < batchMaxEvents {
			d.b.events = append(d.b.events, batchEvent{index: int32(n)})
			d.event(n, &d.b.events[n])
		} else {
			// Past the limit events are still checked, and not kept.
			extra = batchEvent{index: int32(n)}
			d.event(n, &extra)
		}
		n++
	}
	if n < 1 || n > batchMaxEvents {
		d.invalid(-1, "events", msgEventCount)
	}
}

func (d *batchDecoder) event(ev int, e *batchEvent) {
	if d.peek() != '{' {
		d.invalid(ev, "", msgObject)
		d.skip()
		return
	}
	const (
		fName = 1 << iota
		fTime
		fID
		fPage
		fProps
		fAnon
		fUser
		fSession
	)
	var seen uint16
	nameGiven := false
	for more := d.objectStart(); more && !d.failed(); more = d.next('}') {
		k, ok := d.key()
		if !ok {
			return
		}
		switch k {
		case "name":
			if d.once(&seen, fName, ev, k) && !d.null() {
				nameGiven = true
				s, ok := d.stringValue()
				switch {
				case !ok:
					d.invalid(ev, k, msgString)
				case !runesWithin(s, 1, batchMaxNameLen):
					d.invalid(ev, k, msgNameLen)
				case hasOuterSpace(s):
					d.invalid(ev, k, msgNameSpace)
				case s[0] == '$' && !reservedEventName(s):
					d.invalid(ev, k, msgNameReserved)
				}
				e.name = s
			}
		case "time":
			if d.once(&seen, fTime, ev, k) && !d.null() {
				if v, msg := d.integer(); msg != "" {
					d.invalid(ev, k, msg)
				} else {
					e.time = v
					e.flags |= evHasTime
				}
			}
		case "id":
			if d.once(&seen, fID, ev, k) && !d.null() {
				s, ok := d.stringValue()
				id, okID := records.ParseUUID(s)
				if !ok || !okID {
					d.invalid(ev, k, msgUUID)
				} else {
					e.id = id
					e.flags |= evHasID
				}
			}
		case "page":
			if d.once(&seen, fPage, ev, k) && !d.null() {
				d.page(ev, e)
			}
		case "properties":
			if d.once(&seen, fProps, ev, k) && !d.null() {
				if d.peek() != '{' {
					d.invalid(ev, k, msgObject)
					d.skip()
				} else {
					d.properties(ev, e)
				}
			}
		case "anonymousId":
			if d.once(&seen, fAnon, ev, k) && !d.null() {
				e.flags |= evCarriedAnon
				e.anonymousID = d.identifier(ev, k)
			}
		case "userId":
			if d.once(&seen, fUser, ev, k) && !d.null() {
				e.flags |= evCarriedUser
				e.userID = d.identifier(ev, k)
			}
		case "sessionId":
			if d.once(&seen, fSession, ev, k) && !d.null() {
				e.flags |= evCarriedSession
				s, ok := d.stringValue()
				id, okID := records.ParseUUID(s)
				if !ok || !okID {
					d.invalid(ev, k, msgUUID)
				} else {
					e.session = id
					e.flags |= evHasSession
				}
			}
		default:
			d.skip()
		}
	}
	if !nameGiven {
		d.invalid(ev, "name", msgRequired)
	}
}

// identifier reads an anonymousId or userId: 1 to 256 characters, not blank.
func (d *batchDecoder) identifier(ev int, field string) string {
	s, ok := d.stringValue()
	switch {
	case !ok:
		d.invalid(ev, field, msgString)
	case !runesWithin(s, 1, batchMaxIDLen):
		d.invalid(ev, field, msgIDLen)
	case isBlank(s):
		d.invalid(ev, field, msgIDBlank)
	default:
		return s
	}
	return ""
}

func (d *batchDecoder) page(ev int, e *batchEvent) {
	if d.peek() != '{' {
		d.invalid(ev, "page", msgObject)
		d.skip()
		return
	}
	const (
		fURL = 1 << iota
		fTitle
		fReferrer
	)
	var seen uint16
	for more := d.objectStart(); more && !d.failed(); more = d.next('}') {
		k, ok := d.key()
		if !ok {
			return
		}
		var dst *string
		var bit uint16
		var max int
		var field, msgLen string
		switch k {
		case "url":
			dst, bit, max, field, msgLen = &e.url, fURL, batchMaxURLLen, "page.url", msgURLLen
		case "title":
			dst, bit, max, field, msgLen = &e.title, fTitle, batchMaxTitleLen, "page.title", msgTitleLen
		case "referrer":
			dst, bit, max, field, msgLen = &e.referrer, fReferrer, batchMaxURLLen, "page.referrer", msgURLLen
		default:
			d.skip()
			continue
		}
		if !d.once(&seen, bit, ev, field) || d.null() {
			continue
		}
		s, ok := d.stringValue()
		switch {
		case !ok:
			d.invalid(ev, field, msgString)
		case !runesWithin(s, 0, max):
			d.invalid(ev, field, msgLen)
		default:
			*dst = s
		}
	}
}

func (d *batchDecoder) context() {
	if d.peek() != '{' {
		d.invalid(-1, "context", msgObject)
		d.skip()
		return
	}
	const (
		fSDK = 1 << iota
		fLocale
		fTimezone
		fScreen
	)
	c := &d.b.ctx
	var seen uint16
	for more := d.objectStart(); more && !d.failed(); more = d.next('}') {
		k, ok := d.key()
		if !ok {
			return
		}
		switch k {
		case "sdk":
			if d.once(&seen, fSDK, -1, "context.sdk") && !d.null() {
				s, ok := d.stringValue()
				if !ok || !validSDK(s) {
					d.invalid(-1, "context.sdk", msgSDK)
				} else {
					c.sdk = s
				}
			}
		case "locale":
			if d.once(&seen, fLocale, -1, "context.locale") && !d.null() {
				c.carriedLocale = true
				s, ok := d.stringValue()
				if !ok || !validLocale(s) {
					d.invalid(-1, "context.locale", msgLocale)
				} else {
					c.locale = s
				}
			}
		case "timezone":
			if d.once(&seen, fTimezone, -1, "context.timezone") && !d.null() {
				c.carriedTimezone = true
				s, ok := d.stringValue()
				if !ok || !validTimezone(s) {
					d.invalid(-1, "context.timezone", msgTimezone)
				} else {
					c.timezone = s
				}
			}
		case "screen":
			if d.once(&seen, fScreen, -1, "context.screen") && !d.null() {
				c.carriedScreen = true
				d.screen()
			}
		default:
			d.skip()
		}
	}
}

func (d *batchDecoder) screen() {
	if d.peek() != '[' {
		d.invalid(-1, "context.screen", msgScreenList)
		d.skip()
		return
	}
	n, valid := 0, true
	var wh [2]uint16
	for more := d.arrayStart(); more && !d.failed(); more = d.next(']') {
		d.ws()
		if n >= 2 {
			d.skip()
			n++
			continue
		}
		v, msg := d.integer()
		if msg != "" || v > batchMaxScreen {
			d.invalid(-1, "context.screen."+strconv.Itoa(n), msgScreenValue)
			valid = false
		} else {
			wh[n] = uint16(v)
		}
		n++
	}
	if n != 2 {
		d.invalid(-1, "context.screen", msgScreenList)
		valid = false
	}
	if valid {
		d.b.ctx.screen, d.b.ctx.hasScreen = wh, true
	}
}

// finish checks what needs the whole body: required members, duplicate ids,
// the consentless rules.
func (d *batchDecoder) finish() {
	for _, r := range [...]struct {
		bit  uint8
		name string
	}{{seenV, "v"}, {seenBatch, "batch"}, {seenMode, "mode"}, {seenEvents, "events"}} {
		if d.seen&r.bit == 0 {
			d.invalid(-1, r.name, msgRequired)
		}
	}
	events := d.b.events
	ids := 0
	for i := range events {
		if events[i].flags&evHasID != 0 {
			ids++
		}
	}
	if ids > 1 {
		first := make(map[records.UUID]struct{}, ids)
		for i := range events {
			e := &events[i]
			if e.flags&evHasID == 0 {
				continue
			}
			if _, dup := first[e.id]; dup {
				d.invalid(i, "id", msgDuplicateID)
				continue
			}
			first[e.id] = struct{}{}
		}
	}
	if d.b.mode != records.ModeConsentless {
		return
	}
	for i := range events {
		e := &events[i]
		if e.flags&evCarriedAnon != 0 {
			d.invalid(i, "anonymousId", msgConsentless)
		}
		if e.flags&evCarriedUser != 0 {
			d.invalid(i, "userId", msgConsentless)
		}
		if e.flags&evCarriedSession != 0 {
			d.invalid(i, "sessionId", msgConsentless)
		}
	}
	c := &d.b.ctx
	if c.carriedLocale {
		d.invalid(-1, "context.locale", msgConsentless)
	}
	if c.carriedTimezone {
		d.invalid(-1, "context.timezone", msgConsentless)
	}
	if c.carriedScreen {
		d.invalid(-1, "context.screen", msgConsentless)
	}
}

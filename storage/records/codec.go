package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// Errors of Encode and Decode.
var (
	// ErrUnknownVersion: the record starts with a version byte this build
	// cannot read (written by a newer mf).
	ErrUnknownVersion = errors.New("unknown record version")
	// ErrCorrupt: the bytes are not a well-formed record.
	ErrCorrupt = errors.New("corrupt record")
	// ErrInvalid: a Batch holds a value the format cannot carry.
	ErrInvalid = errors.New("invalid batch for the record format")
)

// Version is the version byte that Encode writes first.
const Version = 1

// MaxScreen is the largest screen width or height a record carries.
const MaxScreen = 32768

// Per-event presence flags of format version 1.
const (
	flagPageURL    = 1 << 0
	flagReferrer   = 1 << 1
	flagSession    = 1 << 2
	flagRevenue    = 1 << 3
	flagTitle      = 1 << 4
	flagProperties = 1 << 5
	flagAnonymous  = 1 << 6
	flagUser       = 1 << 7
)

// Scheme codes of format version 1.
const (
	schemeHTTP  = 1
	schemeHTTPS = 2
)

// minEventSize is the fewest bytes one event takes: id, name length, time,
// flags.
const minEventSize = 16 + 1 + 1 + 1

// Encode returns the record bytes of b (format version 1).
func Encode(b *Batch) ([]byte, error) {
	return Append(make([]byte, 0, sizeHint(b)), b)
}

// Append appends the record bytes of b to dst and returns the extended
// buffer. On error dst is returned unchanged in length.
func Append(dst []byte, b *Batch) ([]byte, error) {
	if err := checkEncodable(b); err != nil {
		return dst[:len(dst):len(dst)], err
	}
	out := append(dst, Version)
	out = appendString(out, b.Project)
	out = appendString(out, b.Source)
	out = append(out, byte(b.SourceKind), byte(b.Mode))
	out = append(out, b.ID[:]...)
	out = binary.AppendUvarint(out, uint64(b.ReceivedAt))
	out = binary.AppendUvarint(out, uint64(b.SentAt+1))
	out = appendString(out, b.Receipt.Batch)
	out = binary.AppendUvarint(out, uint64(b.Receipt.Accepted))
	out = binary.AppendUvarint(out, uint64(b.Receipt.Dropped))
	out = appendString(out, b.Receipt.Reason)
	out = appendString(out, b.Edge.Country)
	out = appendString(out, b.Edge.Region)
	out = appendString(out, b.Edge.Device)
	out = appendString(out, b.Edge.Browser)
	out = appendString(out, b.Edge.OS)
	out = binary.AppendUvarint(out, uint64(len(b.Edge.VisitorHash)))
	out = append(out, b.Edge.VisitorHash...)
	out = appendString(out, b.Context.SDK)
	out = appendString(out, b.Context.Locale)
	out = appendString(out, b.Context.Timezone)
	if b.Context.HasScreen {
		out = append(out, 1)
		out = binary.AppendUvarint(out, uint64(b.Context.ScreenWidth))
		out = binary.AppendUvarint(out, uint64(b.Context.ScreenHeight))
	} else {
		out = append(out, 0)
	}
	out = binary.AppendUvarint(out, uint64(len(b.Events)))
	for i := range b.Events {
		out = appendEvent(out, &b.Events[i], b.ReceivedAt)
	}
	return out, nil
}

func appendEvent(out []byte, e *Event, receivedAt int64) []byte {
	out = append(out, e.ID[:]...)
	out = appendString(out, e.Name)
	out = binary.AppendVarint(out, e.Time-receivedAt)
	var flags byte
	if !e.Page.URL.IsZero() {
		flags |= flagPageURL
	}
	if !e.Page.Referrer.IsZero() {
		flags |= flagReferrer
	}
	if !e.SessionID.IsZero() {
		flags |= flagSession
	}
	if e.Revenue != "" {
		flags |= flagRevenue
	}
	if e.Page.Title != "" {
		flags |= flagTitle
	}
	if len(e.Properties) > 0 {
		flags |= flagProperties
	}
	if e.AnonymousID != "" {
		flags |= flagAnonymous
	}
	if e.UserID != "" {
		flags |= flagUser
	}
	out = append(out, flags)
	if flags&flagPageURL != 0 {
		out = appendURL(out, &e.Page.URL, true)
	}
	if flags&flagTitle != 0 {
		out = appendString(out, e.Page.Title)
	}
	if flags&flagReferrer != 0 {
		out = appendURL(out, &e.Page.Referrer, false)
	}
	if flags&flagProperties != 0 {
		out = binary.AppendUvarint(out, uint64(len(e.Properties)))
		out = append(out, e.Properties...)
	}
	if flags&flagAnonymous != 0 {
		out = appendString(out, e.AnonymousID)
	}
	if flags&flagUser != 0 {
		out = appendString(out, e.UserID)
	}
	if flags&flagSession != 0 {
		out = append(out, e.SessionID[:]...)
	}
	if flags&flagRevenue != 0 {
		out = appendString(out, e.Revenue)
		out = appendString(out, e.Currency)
	}
	return out
}

func appendURL(out []byte, u *URL, withQuery bool) []byte {
	if u.Scheme == "https" {
		out = append(out, schemeHTTPS)
	} else {
		out = append(out, schemeHTTP)
	}
	out = appendString(out, u.Host)
	out = appendString(out, u.Port)
	out = appendString(out, u.Path)
	if withQuery {
		out = appendString(out, u.Query)
	}
	return out
}

func appendString(out []byte, s string) []byte {
	out = binary.AppendUvarint(out, uint64(len(s)))
	return append(out, s...)
}

// checkEncodable refuses what Decode would not read back identically.
func checkEncodable(b *Batch) error {
	switch {
	case b.Mode != ModeConsentless && b.Mode != ModeFull:
		return fmt.Errorf("cannot encode batch %s: collection mode %d: %w", b.ID, b.Mode, ErrInvalid)
	case b.SourceKind != SourceWebsite && b.SourceKind != SourceServer:
		return fmt.Errorf("cannot encode batch %s: source kind %d: %w", b.ID, b.SourceKind, ErrInvalid)
	case b.ReceivedAt < 0:
		return fmt.Errorf("cannot encode batch %s: negative received time: %w", b.ID, ErrInvalid)
	case b.SentAt < -1 || b.SentAt == math.MaxInt64:
		return fmt.Errorf("cannot encode batch %s: sentAt %d: %w", b.ID, b.SentAt, ErrInvalid)
	case b.Receipt.Accepted < 0 || b.Receipt.Dropped < 0:
		return fmt.Errorf("cannot encode batch %s: negative receipt count: %w", b.ID, ErrInvalid)
	case b.Context.HasScreen && (b.Context.ScreenWidth > MaxScreen || b.Context.ScreenHeight > MaxScreen):
		return fmt.Errorf("cannot encode batch %s: screen above %d: %w", b.ID, MaxScreen, ErrInvalid)
	case !b.Context.HasScreen && (b.Context.ScreenWidth != 0 || b.Context.ScreenHeight != 0):
		return fmt.Errorf("cannot encode batch %s: screen size without HasScreen: %w", b.ID, ErrInvalid)
	}
	for i := range b.Events {
		e := &b.Events[i]
		if e.Time < 0 {
			return fmt.Errorf("cannot encode batch %s: event %d: negative time: %w", b.ID, i, ErrInvalid)
		}
		if err := checkURL(&e.Page.URL); err != nil {
			return fmt.Errorf("cannot encode batch %s: event %d: page URL: %w", b.ID, i, err)
		}
		if err := checkURL(&e.Page.Referrer); err != nil {
			return fmt.Errorf("cannot encode batch %s: event %d: referrer: %w", b.ID, i, err)
		}
		if e.Page.Referrer.Query != "" {
			return fmt.Errorf("cannot encode batch %s: event %d: referrer with a query: %w", b.ID, i, ErrInvalid)
		}
		if e.Revenue == "" && e.Currency != "" {
			return fmt.Errorf("cannot encode batch %s: event %d: currency without revenue: %w", b.ID, i, ErrInvalid)
		}
	}
	return nil
}

func checkURL(u *URL) error {
	switch u.Scheme {
	case "http", "https":
		return nil
	case "":
		if u.Host != "" || u.Port != "" || u.Path != "" || u.Query != "" {
			return fmt.Errorf("address parts without a scheme: %w", ErrInvalid)
		}
		return nil
	}
	return fmt.Errorf("scheme %q: %w", u.Scheme, ErrInvalid)
}

// sizeHint returns an upper bound of the encoded size of b.
func sizeHint(b *Batch) int {
	const v = binary.MaxVarintLen64
	n := 1 + 2 + 16 + 8*v + len(b.Project) + len(b.Source) + len(b.Receipt.Batch) +
		len(b.Receipt.Reason) + len(b.Edge.Country) + len(b.Edge.Region) + len(b.Edge.Device) +
		len(b.Edge.Browser) + len(b.Edge.OS) + len(b.Edge.VisitorHash) + len(b.Context.SDK) +
		len(b.Context.Locale) + len(b.Context.Timezone) + 14*v
	for i := range b.Events {
		e := &b.Events[i]
		n += 16 + 16 + 1 + 2 + 17*v + len(e.Name) + len(e.Page.Title) + len(e.Properties) +
			len(e.AnonymousID) + len(e.UserID) + len(e.Revenue) + len(e.Currency) +
			len(e.Page.URL.Host) + len(e.Page.URL.Port) + len(e.Page.URL.Path) + len(e.Page.URL.Query) +
			len(e.Page.Referrer.Host) + len(e.Page.Referrer.Port) + len(e.Page.Referrer.Path)
	}
	return n
}

// Decode reads a record written by Encode. Strings of the result share one
// copy of data, and properties and the visitor hash another, so data may be
// reused afterwards; a caller that keeps a single string for long can clone
// it to let the rest go.
func Decode(data []byte) (*Batch, error) {
	var b Batch
	if err := decode(data, &b, false); err != nil {
		return nil, err
	}
	return &b, nil
}

// DecodeShared is Decode into b without copying: the strings and byte
// slices of b alias data, which must stay unchanged while b is in use, and
// b's event slice is reused. For a reader done with each batch before it
// lets go of its bytes (the processor, one message at a time), it saves
// a copy of every record. On error b holds nothing usable.
func DecodeShared(data []byte, b *Batch) error {
	return decode(data, b, true)
}

func decode(data []byte, out *Batch, shared bool) error {
	events := out.Events[:0]
	*out = Batch{}
	if len(data) == 0 {
		return fmt.Errorf("cannot decode record: empty: %w", ErrCorrupt)
	}
	if data[0] != Version {
		return fmt.Errorf("cannot decode record: version %d: %w", data[0], ErrUnknownVersion)
	}
	d := decoder{b: data, pos: 1}
	if shared {
		d.s = unsafe.String(&data[0], len(data))
	} else {
		d.s = string(data)
	}
	b := out
	b.Project = d.str()
	b.Source = d.str()
	b.SourceKind = SourceKind(d.byte1())
	b.Mode = Mode(d.byte1())
	b.ID = d.uuid()
	b.ReceivedAt = d.int63()
	sent := d.uvarint()
	if sent > math.MaxInt64 {
		d.fail("sentAt")
	}
	b.SentAt = int64(sent) - 1
	b.Receipt.Batch = d.str()
	b.Receipt.Accepted = d.count()
	b.Receipt.Dropped = d.count()
	b.Receipt.Reason = d.str()
	b.Edge.Country = d.str()
	b.Edge.Region = d.str()
	b.Edge.Device = d.str()
	b.Edge.Browser = d.str()
	b.Edge.OS = d.str()
	if h := d.bytes(); len(h) > 0 {
		b.Edge.VisitorHash = h
	}
	b.Context.SDK = d.str()
	b.Context.Locale = d.str()
	b.Context.Timezone = d.str()
	switch d.byte1() {
	case 0:
	case 1:
		b.Context.HasScreen = true
		b.Context.ScreenWidth = d.screen()
		b.Context.ScreenHeight = d.screen()
	default:
		d.fail("screen flag")
	}
	n := d.uvarint()
	if d.err == "" && n > uint64(len(d.b)-d.pos)/minEventSize {
		d.fail("event count")
	}
	if d.err != "" {
		return d.error()
	}
	switch {
	case b.Mode != ModeConsentless && b.Mode != ModeFull:
		return fmt.Errorf("cannot decode record: collection mode %d: %w", b.Mode, ErrCorrupt)
	case b.SourceKind != SourceWebsite && b.SourceKind != SourceServer:
		return fmt.Errorf("cannot decode record: source kind %d: %w", b.SourceKind, ErrCorrupt)
	}
	if n > 0 {
		if uint64(cap(events)) >= n {
			b.Events = events[:n]
			clear(b.Events)
		} else {
			b.Events = make([]Event, n)
		}
	}
	for i := range b.Events {
		d.event(&b.Events[i], b.ReceivedAt)
		if d.err != "" {
			return fmt.Errorf("cannot decode record: event %d: %s: %w", i, d.err, ErrCorrupt)
		}
	}
	if d.pos != len(d.b) {
		return fmt.Errorf("cannot decode record: %d bytes after the last event: %w", len(d.b)-d.pos, ErrCorrupt)
	}
	if shared {
		return nil
	}
	// Properties and the visitor hash still point into data: move them to
	// one buffer of their own so that the batch does not alias data.
	n = uint64(len(b.Edge.VisitorHash))
	for i := range b.Events {
		n += uint64(len(b.Events[i].Properties))
	}
	if n > 0 {
		own := make([]byte, 0, n)
		own, b.Edge.VisitorHash = appendOwn(own, b.Edge.VisitorHash)
		for i := range b.Events {
			own, b.Events[i].Properties = appendOwn(own, b.Events[i].Properties)
		}
	}
	return nil
}

// appendOwn appends p to own and returns own and the copy, or nil for an
// empty p.
func appendOwn(own, p []byte) ([]byte, []byte) {
	if len(p) == 0 {
		return own, p
	}
	start := len(own)
	own = append(own, p...)
	return own, own[start:len(own):len(own)]
}

// decoder reads fields in order; the first failure is kept in err and every
// later read returns zero values.
type decoder struct {
	b   []byte
	s   string // the same bytes as b, for substrings without copies
	pos int
	err string
}

func (d *decoder) fail(what string) {
	if d.err == "" {
		d.err = what
	}
	d.pos = len(d.b)
}

func (d *decoder) error() error {
	return fmt.Errorf("cannot decode record: %s: %w", d.err, ErrCorrupt)
}

func (d *decoder) byte1() byte {
	if d.pos >= len(d.b) {
		d.fail("truncated")
		return 0
	}
	c := d.b[d.pos]
	d.pos++
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b[d.pos:])
	if n <= 0 {
		d.fail("bad or truncated varint")
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b[d.pos:])
	if n <= 0 {
		d.fail("bad or truncated varint")
		return 0
	}
	d.pos += n
	return v
}

func (d *decoder) int63() int64 {
	v := d.uvarint()
	if v > math.MaxInt64 {
		d.fail("integer out of range")
		return 0
	}
	return int64(v)
}

func (d *decoder) count() int {
	v := d.uvarint()
	if v > math.MaxInt32 {
		d.fail("count out of range")
		return 0
	}
	return int(v)
}

func (d *decoder) screen() uint16 {
	v := d.uvarint()
	if v > MaxScreen {
		d.fail("screen size out of range")
		return 0
	}
	return uint16(v)
}

func (d *decoder) span() (int, int) {
	n := d.uvarint()
	if n > uint64(len(d.b)-d.pos) {
		d.fail("truncated string")
		return 0, 0
	}
	start := d.pos
	d.pos += int(n)
	return start, d.pos
}

func (d *decoder) str() string {
	a, b := d.span()
	return d.s[a:b]
}

func (d *decoder) bytes() []byte {
	a, b := d.span()
	return d.b[a:b:b]
}

func (d *decoder) uuid() UUID {
	var u UUID
	if len(d.b)-d.pos < 16 {
		d.fail("truncated UUID")
		return u
	}
	copy(u[:], d.b[d.pos:])
	d.pos += 16
	return u
}

func (d *decoder) event(e *Event, receivedAt int64) {
	e.ID = d.uuid()
	e.Name = d.str()
	delta := d.varint()
	if (delta > 0 && receivedAt > math.MaxInt64-delta) || receivedAt+delta < 0 {
		d.fail("time out of range")
		return
	}
	e.Time = receivedAt + delta
	flags := d.byte1()
	if flags&flagPageURL != 0 {
		d.url(&e.Page.URL, true)
	}
	if flags&flagTitle != 0 {
		e.Page.Title = d.str()
	}
	if flags&flagReferrer != 0 {
		d.url(&e.Page.Referrer, false)
	}
	if flags&flagProperties != 0 {
		e.Properties = d.bytes()
		if len(e.Properties) == 0 {
			d.fail("empty properties")
		}
	}
	if flags&flagAnonymous != 0 {
		e.AnonymousID = d.nonEmpty("anonymous id")
	}
	if flags&flagUser != 0 {
		e.UserID = d.nonEmpty("user id")
	}
	if flags&flagSession != 0 {
		e.SessionID = d.uuid()
		if e.SessionID.IsZero() {
			d.fail("nil session id")
		}
	}
	if flags&flagRevenue != 0 {
		e.Revenue = d.nonEmpty("revenue")
		e.Currency = d.str()
	}
	if flags&flagTitle != 0 && e.Page.Title == "" {
		d.fail("empty title")
	}
}

func (d *decoder) nonEmpty(what string) string {
	s := d.str()
	if s == "" {
		d.fail("empty " + what)
	}
	return s
}

func (d *decoder) url(u *URL, withQuery bool) {
	switch d.byte1() {
	case schemeHTTP:
		u.Scheme = "http"
	case schemeHTTPS:
		u.Scheme = "https"
	default:
		d.fail("URL scheme")
		return
	}
	u.Host = d.str()
	u.Port = d.str()
	u.Path = d.str()
	if withQuery {
		u.Query = d.str()
	}
}

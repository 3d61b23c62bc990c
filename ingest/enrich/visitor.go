package enrich

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// visitorDomain separates the visitor hash from any other use of SHA-256
// over the same salt; it names the version of the hash input layout.
const visitorDomain = "mf/visitor/v1\x00"

// VisitorHashLen is the length of a visitor hash: 32 lower-case hex digits
// (the first 128 bits of the SHA-256 digest).
const VisitorHashLen = 32

// visitorHash computes the consentless visitor hash (docs/enrichment.md):
//
//	hex(SHA-256(salt ‖ "mf/visitor/v1\x00" ‖ u16be(len(project)) ‖ project
//	            ‖ NetKey.Key() ‖ User-Agent)[:16])
//
// The project scopes the hash, so two projects never see the same hash for
// one visitor; the network is the IPv4 address or IPv6 /64 (NetKey).
func visitorHash(salt *[SaltSize]byte, projectID string, nk NetKey, ua string) string {
	var stack [512]byte
	b := append(stack[:0], salt[:]...)
	b = append(b, visitorDomain...)
	b = append(b, byte(len(projectID)>>8), byte(len(projectID)))
	b = append(b, projectID...)
	b = nk.AppendKey(b)
	b = append(b, ua...)
	sum := sha256.Sum256(b)
	clear(b) // the salt must not linger in memory past its use
	var out [VisitorHashLen]byte
	hex.Encode(out[:], sum[:VisitorHashLen/2])
	return string(out[:])
}

// saltEntry is the salt of one day, held in memory.
type saltEntry struct {
	day  int64 // days since 1970-01-01 UTC
	salt [SaltSize]byte
}

// dayNumber returns the number of whole UTC days from 1970-01-01 to t.
func dayNumber(t time.Time) int64 {
	s := t.Unix()
	d := s / 86400
	if s%86400 < 0 {
		d--
	}
	return d
}

func dayKeyOf(n int64) string { return DayKey(time.Unix(n*86400, 0)) }

// dailySalts caches the salt of the current day (and, once rotate has run,
// the next day's) so that hashing needs the store once a day. The cache
// never goes back in time: a request stamped just before midnight that is
// handled after one stamped just after it uses the new day's salt.
type dailySalts struct {
	store SaltStore
	mu    sync.Mutex // serialises fetches from the store
	today atomic.Pointer[saltEntry]
	next  atomic.Pointer[saltEntry]
}

// get returns the salt for now's day.
func (d *dailySalts) get(ctx context.Context, now time.Time) (*saltEntry, error) {
	n := dayNumber(now)
	if e := d.today.Load(); e != nil && e.day >= n {
		return e, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.today.Load(); e != nil && e.day >= n {
		return e, nil
	}
	if e := d.next.Load(); e != nil && e.day == n {
		d.today.Store(e)
		d.next.Store(nil)
		return e, nil
	}
	e, err := d.fetch(ctx, n)
	if err != nil {
		return nil, err
	}
	d.today.Store(e)
	return e, nil
}

func (d *dailySalts) fetch(ctx context.Context, n int64) (*saltEntry, error) {
	day := dayKeyOf(n)
	salt, err := d.store.Salt(ctx, day)
	if err != nil {
		return nil, fmt.Errorf("cannot get visitor salt of %s: %w", day, err)
	}
	if len(salt) != SaltSize {
		return nil, fmt.Errorf("cannot use visitor salt of %s: %w (got %d bytes, want %d)", day, ErrCorruptSalt, len(salt), SaltSize)
	}
	e := &saltEntry{day: n}
	copy(e.salt[:], salt)
	clear(salt)
	return e, nil
}

// rotate makes sure the salts of now's day and the next day exist in the
// store and in memory, forgets older ones in memory and deletes them from
// the store.
func (d *dailySalts) rotate(ctx context.Context, now time.Time) error {
	n := dayNumber(now)
	if _, err := d.get(ctx, now); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.next.Load(); e == nil || e.day != n+1 {
		e, err := d.fetch(ctx, n+1)
		if err != nil {
			return err
		}
		d.next.Store(e)
	}
	if err := d.store.DeleteBefore(ctx, dayKeyOf(n)); err != nil {
		return fmt.Errorf("cannot delete visitor salts before %s: %w", dayKeyOf(n), err)
	}
	return nil
}

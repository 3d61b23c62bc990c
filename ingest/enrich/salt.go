package enrich

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mfhq/mf/storage"
)

// SaltSize is the length in bytes of a daily salt.
const SaltSize = 32

// dayLayout formats day keys: the UTC calendar date, which sorts in time
// order as text.
const dayLayout = "2006-01-02"

// DayKey returns the key of the salt day that t falls in: its UTC date,
// "2006-01-02". Salt days begin and end at midnight UTC for every project,
// so all ingest processes switch salts at the same instant.
func DayKey(t time.Time) string { return t.UTC().Format(dayLayout) }

// validDayKey reports whether s has the form of a DayKey.
func validDayKey(s string) bool {
	t, err := time.Parse(dayLayout, s)
	return err == nil && t.Format(dayLayout) == s
}

// SaltStore keeps the daily salts of the consentless visitor hash where
// every ingest process finds them, so that all of them hash one visitor
// alike on one day.
type SaltStore interface {
	// Salt returns the salt of the day with key day (see DayKey), creating
	// it if no process has yet. Every caller, in any process, gets the same
	// SaltSize bytes for the same day.
	Salt(ctx context.Context, day string) ([]byte, error)
	// DeleteBefore deletes the salts of every day before the day with key
	// day.
	DeleteBefore(ctx context.Context, day string) error
}

// SaltBucket is the part of storage.Bucket that BucketSaltStore uses.
type SaltBucket interface {
	Get(ctx context.Context, key string) (*storage.Object, error)
	PutIf(ctx context.Context, key string, r io.Reader, cond storage.Precondition) (string, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, prefix string, fn func(storage.ObjectInfo) error) error
}

// SaltPrefix is where BucketSaltStore keeps salts: one object per day,
// SaltPrefix + DayKey, holding the SaltSize raw bytes.
const SaltPrefix = "enrich/visitor-salt/"

// BucketSaltStore is the SaltStore over the object store. The first
// process to need a day's salt creates it with a create-only put; a process
// that loses that race reads the winner's salt, so all agree.
type BucketSaltStore struct {
	bucket SaltBucket
	random io.Reader
}

// NewBucketSaltStore returns a SaltStore that keeps salts in bucket.
func NewBucketSaltStore(bucket SaltBucket) *BucketSaltStore {
	return &BucketSaltStore{bucket: bucket, random: rand.Reader}
}

// Salt implements SaltStore.
func (s *BucketSaltStore) Salt(ctx context.Context, day string) ([]byte, error) {
	if !validDayKey(day) {
		return nil, fmt.Errorf("cannot get salt of day %q: %w", day, ErrInvalidDay)
	}
	key := SaltPrefix + day
	salt, err := s.read(ctx, key)
	if err == nil || !errors.Is(err, storage.ErrNotFound) {
		return salt, err
	}
	fresh := make([]byte, SaltSize)
	if _, err := io.ReadFull(s.random, fresh); err != nil {
		return nil, fmt.Errorf("cannot create salt of day %s: no randomness: %w", day, err)
	}
	_, err = s.bucket.PutIf(ctx, key, bytes.NewReader(fresh), storage.IfAbsent())
	switch {
	case err == nil:
		return fresh, nil
	case errors.Is(err, storage.ErrPreconditionFailed):
		// Another process created it first: use theirs.
		return s.read(ctx, key)
	}
	return nil, fmt.Errorf("cannot store salt of day %s: %w", day, err)
}

// read returns the salt stored under key.
func (s *BucketSaltStore) read(ctx context.Context, key string) ([]byte, error) {
	obj, err := s.bucket.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("cannot read salt %q: %w", key, err)
	}
	defer obj.Close()
	salt := make([]byte, SaltSize+1)
	n, err := io.ReadFull(obj, salt)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) && n == SaltSize:
		return salt[:SaltSize], nil
	case err == nil || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return nil, fmt.Errorf("cannot use salt %q: %w (want %d bytes)", key, ErrCorruptSalt, SaltSize)
	}
	return nil, fmt.Errorf("cannot read salt %q: %w", key, err)
}

// DeleteBefore implements SaltStore. Objects under SaltPrefix whose name
// is not a day key are left alone.
func (s *BucketSaltStore) DeleteBefore(ctx context.Context, day string) error {
	if !validDayKey(day) {
		return fmt.Errorf("cannot delete salts before day %q: %w", day, ErrInvalidDay)
	}
	var old []string
	err := s.bucket.List(ctx, SaltPrefix, func(o storage.ObjectInfo) error {
		d := strings.TrimPrefix(o.Key, SaltPrefix)
		if validDayKey(d) && d < day {
			old = append(old, o.Key)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot list salts: %w", err)
	}
	for _, k := range old {
		if err := s.bucket.Delete(ctx, k); err != nil {
			return fmt.Errorf("cannot delete salt %q: %w", k, err)
		}
	}
	return nil
}

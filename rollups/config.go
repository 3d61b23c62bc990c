package rollups

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mfhq/mf/storage"
)

// Config configures a Store, the writing side: data files, commits,
// compaction and collection of unreferenced files.
type Config struct {
	// Prefix is the key prefix of every rollup object ("rollups": objects
	// are rollups/<project>/...). Readers must use the same one.
	Prefix string
	// RowGroupRows is the most rows in one Parquet row group. Readers fetch
	// a large file by ranges of one column chunk of one row group, so this
	// sets the size of ranged reads (about 1 to 4 MiB compressed for
	// pageview-like rows at the default 131,072).
	RowGroupRows int64
	// CommitRetries is how often Update retries after losing the commit
	// race before giving up with ErrTooManyRetries.
	CommitRetries int
	// RetireGrace is how long a file removed from the live set (by
	// compaction, replacement or a promoted generation) stays in storage
	// for readers still scanning an older snapshot. Readers refresh their
	// snapshot every ReaderConfig.Freshness, so minutes are plenty.
	RetireGrace time.Duration
	// OrphanGrace is how old an unreferenced data file must be before
	// Collect deletes it as the leftover of a failed commit. A file older
	// than half of it can no longer be committed (ErrStaleFile), so a slow
	// writer never loses a file it is about to commit.
	OrphanGrace time.Duration
	// StagingExpiry is how long a staged generation may go without a
	// commit before Collect aborts it as abandoned (a crashed replay).
	StagingExpiry time.Duration
	// CompactMinFiles is how many files of similar size a partition must
	// have before Compact merges them. Files are tiered by size (each tier
	// CompactMinFiles times the one below), so every row is rewritten about
	// once per tier and a busy day has a few dozen files, not thousands.
	CompactMinFiles int
	// CompactTargetBytes is the size up to which files are merged; larger
	// files are left alone, and a merge stops adding inputs once their sum
	// reaches it.
	CompactTargetBytes int64
	// CompactMaxFiles is the most files one merge reads: a merge holds a
	// batch of rows of each input at once, so this bounds its memory (a
	// partition of more files merges in rounds).
	CompactMaxFiles int
	// CompactQuietAfter: a partition that received no file for this long is
	// settled, and all of its files under CompactTargetBytes are merged
	// into as few as possible, even fewer than CompactMinFiles.
	CompactQuietAfter time.Duration
	// PoolBytes is how many bytes of freed Arrow buffers the Store keeps
	// for the records it writes next (BufferPool); 0 keeps none.
	PoolBytes int64
	// Metrics counts files written, merged and deleted (NewMetrics); nil:
	// nothing.
	Metrics *Metrics
}

// DefaultConfig returns the defaults: prefix "rollups", row groups of
// 131,072 rows, 100 commit retries, 10 minutes retire grace, 1 hour orphan
// grace, staged generations abandoned after 7 days, compaction of 8 files
// per tier up to 128 MiB and 32 files a merge, settled partitions after
// 1 hour.
func DefaultConfig() Config {
	return Config{
		Prefix:             "rollups",
		RowGroupRows:       1 << 17,
		CommitRetries:      100,
		RetireGrace:        10 * time.Minute,
		OrphanGrace:        time.Hour,
		StagingExpiry:      7 * 24 * time.Hour,
		CompactMinFiles:    8,
		CompactMaxFiles:    32,
		CompactTargetBytes: 128 << 20,
		CompactQuietAfter:  time.Hour,
		PoolBytes:          256 << 20,
	}
}

// Validate reports what in c is unusable, and how to fix it.
func (c Config) Validate() error {
	var errs []error
	if err := validatePrefix(c.Prefix); err != nil {
		errs = append(errs, err)
	}
	if c.RowGroupRows < 1024 {
		errs = append(errs, fmt.Errorf("RowGroupRows is %d; use at least 1024 (default %d)", c.RowGroupRows, DefaultConfig().RowGroupRows))
	}
	if c.CommitRetries < 1 {
		errs = append(errs, fmt.Errorf("CommitRetries is %d; use at least 1", c.CommitRetries))
	}
	if c.RetireGrace < time.Second {
		errs = append(errs, fmt.Errorf("RetireGrace is %v; use at least a second (default %v) so readers can finish scanning older snapshots", c.RetireGrace, DefaultConfig().RetireGrace))
	}
	if c.OrphanGrace < 2*time.Second {
		errs = append(errs, fmt.Errorf("OrphanGrace is %v; use at least 2s (default %v) so writers can commit what they wrote", c.OrphanGrace, DefaultConfig().OrphanGrace))
	}
	if c.StagingExpiry < c.OrphanGrace {
		errs = append(errs, fmt.Errorf("StagingExpiry (%v) is shorter than OrphanGrace (%v); use a longer one", c.StagingExpiry, c.OrphanGrace))
	}
	if c.CompactMinFiles < 2 {
		errs = append(errs, fmt.Errorf("CompactMinFiles is %d; use at least 2", c.CompactMinFiles))
	}
	if c.CompactMaxFiles < c.CompactMinFiles {
		errs = append(errs, fmt.Errorf("CompactMaxFiles is %d; use at least CompactMinFiles (%d)", c.CompactMaxFiles, c.CompactMinFiles))
	}
	if c.CompactTargetBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("CompactTargetBytes is %d; use at least 1 MiB", c.CompactTargetBytes))
	}
	if c.PoolBytes < 0 {
		errs = append(errs, fmt.Errorf("PoolBytes is %d; use 0 or more", c.PoolBytes))
	}
	if c.CompactQuietAfter <= 0 {
		errs = append(errs, fmt.Errorf("CompactQuietAfter is %v; use a positive duration", c.CompactQuietAfter))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid rollups config: %w", err)
	}
	return nil
}

// ReaderConfig configures a Reader.
type ReaderConfig struct {
	// Prefix is the key prefix of the rollup objects, as in Config.
	Prefix string
	// Freshness is how old a reader's view of a manifest may get: a
	// Snapshot older than this first asks the store for the manifest's
	// ETag (one metadata request) and fetches the manifest only when it
	// changed.
	Freshness time.Duration
	// CacheBytes bounds the memory of decoded column data kept across
	// scans (least recently used first out). Files are immutable, so
	// cached data never goes stale. 0 turns the cache off.
	CacheBytes int64
	// WholeFileBytes: files up to this size are fetched whole with one
	// request; larger ones by ranges (the footer, then one range per
	// column chunk needed).
	WholeFileBytes int64
	// Parallelism is how many files or row groups a scan loads at once.
	Parallelism int
}

// DefaultReaderConfig returns the defaults: prefix "rollups", 100 ms
// freshness, a 512 MiB cache, whole-file reads up to 4 MiB, 4 loads at
// once.
func DefaultReaderConfig() ReaderConfig {
	return ReaderConfig{
		Prefix:         "rollups",
		Freshness:      100 * time.Millisecond,
		CacheBytes:     512 << 20,
		WholeFileBytes: 4 << 20,
		Parallelism:    4,
	}
}

// Validate reports what in c is unusable, and how to fix it.
func (c ReaderConfig) Validate() error {
	var errs []error
	if err := validatePrefix(c.Prefix); err != nil {
		errs = append(errs, err)
	}
	if c.Freshness < 0 {
		errs = append(errs, fmt.Errorf("Freshness is %v; use 0 (always ask) or a positive duration", c.Freshness))
	}
	if c.CacheBytes < 0 {
		errs = append(errs, fmt.Errorf("CacheBytes is %d; use 0 (no cache) or a positive size", c.CacheBytes))
	}
	if c.WholeFileBytes < 0 {
		errs = append(errs, fmt.Errorf("WholeFileBytes is %d; use 0 (always ranged) or a positive size", c.WholeFileBytes))
	}
	if c.Parallelism < 1 {
		errs = append(errs, fmt.Errorf("Parallelism is %d; use at least 1", c.Parallelism))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid rollups reader config: %w", err)
	}
	return nil
}

func validatePrefix(p string) error {
	if p == "" || strings.HasSuffix(p, "/") {
		return fmt.Errorf("Prefix %q must be a key prefix without a trailing '/' (default %q)", p, "rollups")
	}
	if err := storage.ValidateKey(p); err != nil {
		return fmt.Errorf("Prefix %q: %w", p, err)
	}
	return nil
}

package rollups

import "errors"

// Sentinel errors of the package. Functions wrap them with what could not be
// done; test with errors.Is.
var (
	// ErrConflict: the manifest is no longer at the version a commit was
	// based on (another committer won the race). Nothing was written to the
	// manifest; reload it and decide again (Store.Update does this).
	ErrConflict = errors.New("manifest changed since the version the commit was based on")
	// ErrInvalidTable: a table definition (name, schema, sort key) is not
	// usable.
	ErrInvalidTable = errors.New("invalid table definition")
	// ErrInvalidName: a project id, partition, checkpoint name or generation
	// id breaks the naming rules.
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidChange: a change cannot apply to the manifest it names
	// (removing a file that is not live, adding one twice, a file of another
	// project).
	ErrInvalidChange = errors.New("invalid change")
	// ErrStaleFile: a data file was written longer ago than half the orphan
	// grace period; the collector may already have deleted it as an orphan,
	// so it cannot be committed. Write it again.
	ErrStaleFile = errors.New("data file too old to commit")
	// ErrCorruptManifest: a manifest object could not be decoded or breaks
	// the manifest rules.
	ErrCorruptManifest = errors.New("corrupt manifest")
	// ErrGenerationGone: the staged generation named does not exist (never
	// started, aborted, or already promoted).
	ErrGenerationGone = errors.New("staged generation does not exist")
	// ErrSchemaMismatch: a data file's columns cannot be read as the table's
	// schema (a column changed type, or a required column is missing).
	ErrSchemaMismatch = errors.New("data file does not match the table schema")
	// ErrFileGone: a data file or sub-manifest named by a manifest
	// snapshot has been deleted (the snapshot is older than the retire
	// grace period). Take a new snapshot and scan again.
	ErrFileGone = errors.New("data file of the snapshot has been deleted")
	// ErrUnknownColumn: a scan asked for a column the table does not have.
	ErrUnknownColumn = errors.New("unknown column")
	// ErrTooManyRetries: Store.Update lost the commit race more often than
	// Config.CommitRetries allows.
	ErrTooManyRetries = errors.New("too many commit conflicts")
)

// errNothing stops a commit that has nothing to write (internal).
var errNothing = errors.New("nothing to commit")

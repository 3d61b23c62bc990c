package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/mfhq/mf/api"
	"github.com/mfhq/mf/processor"
	"github.com/mfhq/mf/storage"
	"github.com/mfhq/mf/storage/eventlog"
)

// privacyHooks wires person erasure and export into the admin API when this
// process has the log, the store and a reader of the tables
// (docs/privacy.md).
func (s *service) privacyHooks(acfg *api.AdminConfig) {
	if s.bucket == nil || s.reader == nil {
		return
	}
	notFound := func(err error) error {
		if errors.Is(err, processor.ErrNoProject) || errors.Is(err, processor.ErrUnknownPerson) || errors.Is(err, storage.ErrNotFound) {
			return fmt.Errorf("%w: %v", api.ErrNotFound, err)
		}
		return err
	}
	acfg.ErasureStatus = func(ctx context.Context, project, id string) (any, error) {
		rec, err := processor.ErasureStatus(ctx, s.bucket, project, id)
		return rec, notFound(err)
	}
	acfg.Export = func(ctx context.Context, project, ref string, w io.Writer) error {
		return notFound(processor.Export(ctx, s.reader, s.cat, project, ref, w))
	}
	if s.log == nil {
		return
	}
	acfg.Erase = func(ctx context.Context, project, ref string) (any, error) {
		rec, err := processor.RequestErasure(ctx, processor.ErasureDeps{Bucket: s.bucket, Reader: s.reader,
			Log: s.log.Publisher(), Catalog: s.cat, Topic: eventlog.TopicBatches}, project, ref, time.Now())
		if err != nil {
			return nil, notFound(err)
		}
		return map[string]string{"id": rec.ID, "state": rec.State}, nil
	}
}

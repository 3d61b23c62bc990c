package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mfhq/mf/api"
	"github.com/mfhq/mf/ingest"
)

// reloadGeoIP reads the --geoip file again and swaps it in atomically
// (SIGHUP, POST /admin/v1/geoip/reload). Errors wrap api.ErrNotFound when
// no database is configured.
func (s *service) reloadGeoIP() error {
	if s.ingest == nil {
		return errors.New("this process runs no ingest service")
	}
	err := s.ingest.ReloadGeoIP()
	switch {
	case errors.Is(err, ingest.ErrNoGeoIP):
		return fmt.Errorf("%w: mf was started without --geoip", api.ErrNotFound)
	case err != nil:
		return err
	}
	s.logger.Info("GeoIP database reloaded", "file", s.cfg.GeoIP)
	return nil
}

// adminReloadGeoIP is the admin API's hook: nil when this process runs no
// ingest service (the endpoint then answers 501).
func (s *service) adminReloadGeoIP() func() error {
	if s.ingest == nil {
		return nil
	}
	return s.reloadGeoIP
}

// handleSIGHUP reloads the GeoIP database on each SIGHUP until ctx ends.
// The signal is caught in every role, so that a SIGHUP sent to a process
// without --geoip does not end it.
func (s *service) handleSIGHUP(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := s.reloadGeoIP(); err != nil {
					s.logger.Warn("SIGHUP: GeoIP database not reloaded", "err", err)
				}
			}
		}
	}()
}

package ingest

import (
	"errors"

	"github.com/mfhq/mf/ingest/enrich"
)

// ErrNoGeoIP: ReloadGeoIP was called on a service started without --geoip.
var ErrNoGeoIP = enrich.ErrNoGeoIP

// ReloadGeoIP reads the GeoIP database file (Config.GeoIP) again and
// swaps it in atomically: requests in progress finish on the old
// database, later ones use the new. On failure the old one stays in use.
func (s *Server) ReloadGeoIP() error {
	err := s.enr.ReloadGeoIP()
	if err != nil && !errors.Is(err, enrich.ErrNoGeoIP) {
		s.logger.Error("ingest: GeoIP database not reloaded; the previous one stays in use", "file", s.cfg.GeoIP, "err", err)
	}
	return err
}

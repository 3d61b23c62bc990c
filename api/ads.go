package api

import "github.com/gofiber/fiber/v2"

// getAds is not built yet.
func (r *Reporting) getAds(c *fiber.Ctx) error {
	return refuse(fiber.StatusNotImplemented, "not_implemented", "", "not built yet")
}

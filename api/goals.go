package api

import "github.com/gofiber/fiber/v2"

// listGoals is not built yet.
func (r *Reporting) listGoals(c *fiber.Ctx) error {
	return refuse(fiber.StatusNotImplemented, "not_implemented", "", "not built yet")
}

// getGoalReport is not built yet.
func (r *Reporting) getGoalReport(c *fiber.Ctx) error {
	return refuse(fiber.StatusNotImplemented, "not_implemented", "", "not built yet")
}

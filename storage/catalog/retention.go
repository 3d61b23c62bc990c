package catalog

// planRetention is the history each plan keeps, in days.
var planRetention = map[string]int{PlanFree: 30, PlanPro: 366, PlanEnterprise: 1095}

// RetentionDays is the history an organization's plan keeps, in days
// counting today: 30 (free, and any plan this build does not know), 366
// (pro) or 1,095 (enterprise). The reporting API reads no further back,
// and the processor deletes what is older (docs/privacy.md).
func RetentionDays(plan string) int {
	if d, ok := planRetention[plan]; ok {
		return d
	}
	return planRetention[PlanFree]
}

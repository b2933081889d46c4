package karpenter

import (
	"fmt"
	"strconv"
	"strings"
)

// cronDescriptors are the @-shorthands Karpenter's budget schedules accept.
var cronDescriptors = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

type cronField struct {
	name     string
	min, max int
	names    map[string]int
}

var monthNames = map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
	"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}
var dayNames = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

var cronFields = []cronField{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: monthNames},
	{name: "day of week", min: 0, max: 7, names: dayNames},
}

// ParseCron checks a budget schedule: five fields (minute hour day-of-month month
// day-of-week) or an @-descriptor such as @daily, as Kubernetes CronJobs write them.
func ParseCron(s string) error {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "@") {
		if cronDescriptors[s] {
			return nil
		}
		return fmt.Errorf("unknown schedule %q: use @yearly, @monthly, @weekly, @daily, @hourly or five cron fields such as \"0 9 * * mon-fri\"", s)
	}
	fields := strings.Fields(s)
	if len(fields) != 5 {
		return fmt.Errorf("schedule %q has %d fields; write five: minute hour day-of-month month day-of-week, such as \"0 9 * * mon-fri\"", s, len(fields))
	}
	for i, f := range fields {
		if err := cronFields[i].check(f); err != nil {
			return fmt.Errorf("schedule %q: %s field %q: %v", s, cronFields[i].name, f, err)
		}
	}
	return nil
}

func (cf cronField) value(s string) (int, error) {
	if v, ok := cf.names[strings.ToLower(s)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < cf.min || v > cf.max {
		return 0, fmt.Errorf("%d is out of range %d-%d", v, cf.min, cf.max)
	}
	return v, nil
}

func (cf cronField) check(f string) error {
	for _, item := range strings.Split(f, ",") {
		rng, step, hasStep := strings.Cut(item, "/")
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil || n <= 0 {
				return fmt.Errorf("step %q must be a positive number", step)
			}
		}
		if rng == "*" || rng == "?" {
			continue
		}
		lo, hi, isRange := strings.Cut(rng, "-")
		a, err := cf.value(lo)
		if err != nil {
			return err
		}
		if isRange {
			b, err := cf.value(hi)
			if err != nil {
				return err
			}
			if b < a {
				return fmt.Errorf("range %s ends before it starts", rng)
			}
		}
	}
	return nil
}

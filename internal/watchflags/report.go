package watchflags

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/nodewatch/nodewatch/internal/watch"
)

// Goal describes the goal the options set (--until, --each, --once or
// --count), for a run that ended before it was met.
func (o *Options) Goal() string {
	held := ""
	if o.Stable > 0 {
		held = fmt.Sprintf(" for %v (--stable)", o.Stable)
	}
	switch {
	case o.Until != nil:
		return "--until was met" + held
	case o.Each != nil && o.AtLeast > 0:
		return fmt.Sprintf("%d objects met --each", o.AtLeast) + held
	case o.Each != nil:
		return "every object met --each" + held
	case o.Once:
		return "the initial state was printed (--once)"
	case o.Count > 0:
		return fmt.Sprintf("%d events were printed (--count)", o.Count)
	}
	return "none"
}

// Report tells why res, a run that ended without its goal, ended: each
// line through logf, and as JSON into --report FILE. The error names
// --report.
func (o *Options) Report(res watch.Result, logf func(format string, args ...any)) error {
	for _, line := range res.Report.Lines(o.Options, o.What) {
		logf("report: %s", line)
	}
	if o.reportFile == "" {
		return nil
	}
	b, err := json.MarshalIndent(struct {
		Stop string `json:"stop"`
		Goal string `json:"goal"`
		*watch.Report
	}{res.Stop.String(), o.Goal(), res.Report}, "", "  ")
	if err == nil {
		err = os.WriteFile(o.reportFile, append(b, '\n'), 0o644)
	}
	if err != nil {
		return fmt.Errorf("--report: %w", err)
	}
	return nil
}

package render

import "time"

// SetClock makes now the clock of r's reports.
func SetClock(r *Renderer, now func() time.Time) { r.now = now }

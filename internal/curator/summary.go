package curator

import (
	"strings"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// Summary is what a person reads of a node (-o text): its state, its
// health (when the object has one), its external address and its roles.
// obj is a node as nodewatch prints it (a *jsondoc.Doc or its tree).
func Summary(obj any) string {
	n, _ := jsondoc.TreeOf(obj).(map[string]any)
	state, _ := n["state"].(string)
	state = strings.TrimPrefix(state, "NODE_STATE_")
	if state == "" {
		state = "INVALID"
	}
	parts := []string{state}
	if h, ok := n["health"].(string); ok { // health
		parts = append(parts, strings.TrimPrefix(h, "HEALTH_"))
	}
	if st, ok := n["status"].(map[string]any); ok {
		if a, ok := st["external_address"].(string); ok {
			parts = append(parts, a)
		}
	}
	if roles, ok := n["roles"].(map[string]any); ok {
		var rs []string
		for _, r := range []string{"consensus_member", "kubernetes_controller", "kubernetes_worker"} {
			if _, ok := roles[r]; ok {
				rs = append(rs, r)
			}
		}
		if len(rs) > 0 {
			parts = append(parts, strings.Join(rs, ","))
		}
	}
	return strings.Join(parts, " ")
}

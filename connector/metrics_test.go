package connector

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMirrorMetricsComplete: every series a mirror records to is resolved
// (a field left nil would panic the first time the data path touches it).
func TestMirrorMetricsComplete(t *testing.T) {
	t.Parallel()
	mm := NewMetrics(prometheus.NewRegistry()).forMirror("m")
	v := reflect.ValueOf(mm).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.IsNil() {
			t.Errorf("mirrorMetrics.%s is nil", v.Type().Field(i).Name)
		}
	}
}

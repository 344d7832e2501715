package rows

import (
	"context"
	"encoding/json"
	"strings"

	"kubegate/internal/informer"
)

// crdOf returns the cached CustomResourceDefinition of a custom
// resource, or nil for built-in resources, or when CRDs cannot be read.
func crdOf(ctx context.Context, mgr *informer.Manager, info *informer.ResourceInfo) *informer.Object {
	if mgr == nil || !strings.Contains(info.GVR.Group, ".") || strings.HasSuffix(info.GVR.Group, ".k8s.io") {
		return nil
	}
	crds, err := mgr.Resource(ctx, "customresourcedefinitions.apiextensions.k8s.io")
	if err != nil || crds.WaitForSync(ctx) != nil {
		return nil
	}
	o, _ := crds.Get("", info.GVR.Resource+"."+info.GVR.Group)
	return o
}

// crdDatePaths returns the JSONPaths of the date printer columns of
// version in a CustomResourceDefinition, by column name.
func crdDatePaths(crd *informer.Object, version string) map[string]string {
	var def struct {
		Spec struct {
			Versions []struct {
				Name    string `json:"name"`
				Columns []struct {
					Name     string `json:"name"`
					Type     string `json:"type"`
					JSONPath string `json:"jsonPath"`
				} `json:"additionalPrinterColumns"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if json.Unmarshal(crd.Raw, &def) != nil {
		return nil
	}
	paths := map[string]string{}
	for _, v := range def.Spec.Versions {
		if v.Name != version {
			continue
		}
		for _, c := range v.Columns {
			if c.Type == "date" {
				paths[c.Name] = c.JSONPath
			}
		}
	}
	return paths
}

# kubegate gateway image: a static binary on distroless, running as
# non-root. The dashboard (web/) is embedded with go:embed, so the binary
# is all there is to copy. Build: `make image`.
FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so source edits reuse this layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/gateway ./cmd/gateway

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/gateway /gateway
# 65532 is distroless's "nonroot"; numeric so runAsNonRoot can verify it.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/gateway"]

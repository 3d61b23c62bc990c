module uacompare

go 1.26.8

require (
	github.com/mileusna/useragent v1.3.5
	github.com/mssola/useragent v1.0.0
	github.com/ua-parser/uap-go v0.0.0-20260529044130-17c35e68e58c
)

require (
	github.com/hashicorp/golang-lru v1.0.2 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

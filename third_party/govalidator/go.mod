module github.com/asaskevich/govalidator

go 1.21

"""The application's one identity, shared by QApplication, packaging and reports."""

APP_ID = "io.github.rigspark.RigSpark"
APP_NAME = "RigSpark"
APP_VERSION = "0.1.0"
ORGANIZATION = "RigSpark"

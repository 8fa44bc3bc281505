import os

os.environ["USER_SITECUSTOMIZE_RAN"] = "yes"

import gc
import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mlplatform.settings")
application = get_wsgi_application()
get_resolver().check()  # imports every view, serializer and service now rather than on the first requests

# Django and the modules loaded above are some 200,000 long-lived objects that the cyclic garbage collector would
# otherwise scan again in every full collection, stalling a request for 50-90 ms each time. None of them becomes
# garbage, so exempt them from collection for the life of the process (full collections then take about 3 ms).
gc.freeze()

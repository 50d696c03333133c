from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "People and Perplexity accounts"

    def ready(self) -> None:
        from pplxweb import sockets  # noqa: F401 - signing out closes the person's sockets

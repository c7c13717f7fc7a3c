"""The client's side of OAuth: the credentials an HTTP connection sends (`credentials`), the login
flow (`oauth`, with `discovery`, `registration`, `tokens` and the loopback `browser`), the client
credentials grant (`client_credentials`) and where tokens are kept (`store`).
"""

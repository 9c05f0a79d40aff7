#include "core/tls/crl.hpp"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "core/tls/openssl_text.hpp"
#include "sluice/error.hpp"

namespace sluice::tls {

namespace {

struct InfoStackFree {
    void operator()(STACK_OF(X509_INFO) * s) const { sk_X509_INFO_pop_free(s, X509_INFO_free); }
};
struct BioFree {
    void operator()(BIO* b) const { BIO_free(b); }
};

// The CA of the store whose subject issued crl; nullptr when none of --ca's is its issuer (an
// intermediate CA the peer sends in its chain: its signature is checked at the handshake).
X509* issuer_in(X509_STORE* store, const X509_CRL* crl) {
    STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(store);
    for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i) {
        X509* ca = X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objects, i));
        if (ca && X509_NAME_cmp(X509_get_subject_name(ca), X509_CRL_get_issuer(crl)) == 0) return ca;
    }
    return nullptr;
}

} // namespace

void load_crls(SSL_CTX* ctx, const std::string& crl_file, const std::string& ca_file) {
    const std::string head = "--crl " + crl_file;
    std::unique_ptr<BIO, BioFree> bio(BIO_new_file(crl_file.c_str(), "r"));
    if (!bio) throw Error(ErrorCode::usage, head + ": cannot read it (" + openssl_reason() + ")");
    std::unique_ptr<STACK_OF(X509_INFO), InfoStackFree> infos(PEM_X509_INFO_read_bio(bio.get(), nullptr, nullptr, nullptr));
    if (!infos) throw Error(ErrorCode::usage, head + ": no PEM CRL (BEGIN X509 CRL) in it (" + openssl_reason() + ")");
    X509_STORE* store = SSL_CTX_get_cert_store(ctx);
    int crls = 0;
    for (int i = 0; i < sk_X509_INFO_num(infos.get()); ++i) {
        X509_CRL* crl = sk_X509_INFO_value(infos.get(), i)->crl;
        if (!crl) continue;
        const std::string issuer = name_text(X509_CRL_get_issuer(crl));
        if (X509* ca = issuer_in(store, crl); ca && X509_CRL_verify(crl, X509_get0_pubkey(ca)) != 1) {
            ERR_clear_error();
            throw Error(ErrorCode::usage, head + ": the CRL of " + issuer + " is not signed by that CA of --ca " + ca_file);
        }
        const ASN1_TIME* next = X509_CRL_get0_nextUpdate(crl);
        if (next && X509_cmp_current_time(next) < 0)
            throw Error(ErrorCode::usage, head + ": the CRL of " + issuer + " is past its next update (expired): fetch a fresh one");
        if (X509_STORE_add_crl(store, crl) != 1) throw Error(ErrorCode::usage, head + ": " + openssl_reason());
        ++crls;
    }
    if (crls == 0) throw Error(ErrorCode::usage, head + ": no PEM CRL (BEGIN X509 CRL) in it");
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
}

bool is_revocation_error(int e) {
    switch (e) {
    case X509_V_ERR_CERT_REVOKED:
    case X509_V_ERR_UNABLE_TO_GET_CRL:
    case X509_V_ERR_UNABLE_TO_GET_CRL_ISSUER:
    case X509_V_ERR_CRL_HAS_EXPIRED:
    case X509_V_ERR_CRL_NOT_YET_VALID:
    case X509_V_ERR_CRL_SIGNATURE_FAILURE:
    case X509_V_ERR_UNABLE_TO_DECRYPT_CRL_SIGNATURE:
    case X509_V_ERR_DIFFERENT_CRL_SCOPE:
        return true;
    default:
        return false;
    }
}

std::string revoked_text(X509* cert, const std::string& crl_file) {
    std::string serial = "?";
    if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr)) {
        if (char* hex = BN_bn2hex(bn)) {
            serial = hex;
            OPENSSL_free(hex);
        }
        BN_free(bn);
    }
    return "its certificate (" + name_text(X509_get_subject_name(cert)) + ", serial " + serial + ") is revoked by --crl " +
           crl_file;
}

} // namespace sluice::tls

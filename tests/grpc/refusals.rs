//! Every refusal the layer makes itself, as its gRPC status for a real tonic client, over
//! TCP: the routes the HTTP refusal tests ask (`ratekeeper_tests::refusals`).

use http::uri::PathAndQuery;
use ratekeeper_tests::Server;
use ratekeeper_tests::refusals::{CASES, app};
use ratekeeper_tower::Answering;
use tonic::Code;
use tonic_types::StatusExt;

#[tokio::test]
async fn every_refusal_is_its_grpc_status_for_a_real_grpc_client() {
    let server = Server::start(app(&Answering::new())).await.unwrap();
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", server.addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    for (path, before, status, code) in CASES {
        let mut call = async || {
            let mut req = tonic::Request::new(());
            if path != "/missing" {
                req.metadata_mut().insert("x-key", "k".parse().unwrap());
            }
            grpc.ready().await.unwrap();
            let codec = tonic_prost::ProstCodec::<(), ()>::default();
            let path = PathAndQuery::try_from(path).unwrap();
            grpc.unary(req, path, codec).await
        };
        for _ in 0..before {
            // Admitted: the handler's plain "ok" is no gRPC message, whatever tonic makes of it.
            let _ = call().await;
        }
        let refused = call().await.unwrap_err();
        let want = match status {
            400 => Code::InvalidArgument,
            401 => Code::Unauthenticated,
            403 => Code::PermissionDenied,
            429 => Code::ResourceExhausted,
            _ => Code::Unavailable,
        };
        assert_eq!(refused.code(), want, "{path}: {refused:?}");
        assert!(
            refused.message().ends_with(&format!("({code})")),
            "{path}: {refused:?}"
        );
        let waits = matches!(status, 429 | 503);
        assert_eq!(refused.get_details_retry_info().is_some(), waits, "{path}");
        let pushback = refused.metadata().get("grpc-retry-pushback-ms");
        assert_eq!(pushback.is_some(), waits, "{path}");
    }
}
